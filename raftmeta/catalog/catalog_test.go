package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"strom/internal/metatest"
	"strom/raftmeta"
	"strom/record"
)

// The JSON of each znode kind, byte for byte what Fluss's serializers write
// (expected strings from Fluss's own *JsonSerdeTest classes where they exist).
func TestJSONShapesMatchFluss(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"database", DatabaseRegistration{Version: 1, CustomProperties: map[string]string{"option-3": "300"}, CreatedTime: 1735538268, ModifiedTime: 1735538268},
			`{"version":1,"custom_properties":{"option-3":"300"},"created_time":1735538268,"modified_time":1735538268}`},
		{"database with comment", DatabaseRegistration{Version: 1, Comment: "second-table", CustomProperties: map[string]string{}, CreatedTime: -1, ModifiedTime: -1},
			`{"version":1,"comment":"second-table","custom_properties":{},"created_time":-1,"modified_time":-1}`},
		{"assignment", TableAssignment{Buckets: map[int32][]int32{0: {1, 4, 5}, 1: {2, 3}}},
			`{"version":1,"buckets":{"0":[1,4,5],"1":[2,3]}}`},
		{"leader and isr", LeaderAndISR{Version: 2, Leader: 1, LeaderEpoch: 10, ISR: []int32{1, 2, 3}, CoordinatorEpoch: 100, BucketEpoch: 1000, StandbyReplicas: []int32{}, ISSR: []int32{}},
			`{"version":2,"leader":1,"leader_epoch":10,"isr":[1,2,3],"coordinator_epoch":100,"bucket_epoch":1000,"hot_standby_replicas":[],"issr":[]}`},
		{"table", TableRegistration{Version: 1, TableID: 1234, Comment: "first-table", PartitionKeys: []string{"a", "b"}, BucketKeys: []string{"b", "c"}, BucketCount: 16,
			Properties: map[string]string{"option-1": "100"}, CustomProperties: map[string]string{"custom-1": "\"value-1\""}, RemoteDataDir: "file://local/remote", CreatedTime: 1735538268, ModifiedTime: 1735538268},
			`{"version":1,"table_id":1234,"comment":"first-table","partition_key":["a","b"],"bucket_key":["b","c"],"bucket_count":16,"properties":{"option-1":"100"},"custom_properties":{"custom-1":"\"value-1\""},"remote_data_dir":"file://local/remote","created_time":1735538268,"modified_time":1735538268}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	var a TableAssignment
	if err := json.Unmarshal([]byte(`{"version":1,"buckets":{"x":[1]}}`), &a); err == nil {
		t.Fatal("non-numeric bucket id accepted")
	}
}

func apply(t *testing.T, n *raftmeta.Node, ops []raftmeta.Op, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Multi(context.Background(), 0, ops...); err != nil {
		t.Fatal(err)
	}
}

func TestCreateReadDrop(t *testing.T) {
	n := metatest.NewNode(t)
	c := New(n)
	apply(t, n, c.BootstrapOps("cid"), nil)
	if ops := c.BootstrapOps("other"); len(ops) != 0 {
		t.Fatalf("bootstrap is not idempotent: %v", ops)
	}
	if id, _ := c.ClusterID(); id != "cid" {
		t.Fatalf("cluster id = %q", id)
	}
	ops, epoch, version, err := c.ElectOps(1, "127.0.0.1:9123")
	apply(t, n, ops, err)
	if addr, e, v, err := c.Coordinator(); err != nil || e != epoch || v != version || addr.ID != "1" || addr.Listeners != "CLIENT://127.0.0.1:9123" {
		t.Fatalf("coordinator = %+v %d %d %v, want epoch %d version %d", addr, e, v, err, epoch, version)
	}

	ops, err = c.CreateDatabaseOps("db", DatabaseRegistration{Comment: "hi"})
	apply(t, n, ops, err)
	if _, err := c.CreateDatabaseOps("db", DatabaseRegistration{}); !errors.Is(err, ErrDatabaseExists) {
		t.Fatalf("create twice: %v", err)
	}
	schema := record.Schema{
		Columns:    []record.Column{{Name: "k", Type: record.DataType{Root: record.BigInt}}, {Name: "v", Type: record.DataType{Root: record.String, Nullable: true}}},
		PrimaryKey: []string{"k"},
	}
	for i, name := range []string{"a", "b"} {
		id, claim, err := c.NextTableID()
		if err != nil || id != int64(i) {
			t.Fatalf("next table id = %d, %v; want %d", id, err, i)
		}
		assign := TableAssignment{Buckets: map[int32][]int32{0: {1}, 1: {1}}}
		ops, err := c.CreateTableOps(NewTable{
			Database: "db", Name: name, Schema: schema,
			Registration: TableRegistration{TableID: id, BucketKeys: []string{"k"}, BucketCount: 2},
			Assignment:   &assign,
			LeaderISR:    map[int32]LeaderAndISR{0: {Leader: 1, ISR: []int32{1}}, 1: {Leader: 1, ISR: []int32{1}}},
		})
		apply(t, n, append([]raftmeta.Op{claim}, ops...), err)
	}
	tbl, err := c.Table("db", "b")
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Registration.TableID != 1 || tbl.SchemaID != 1 || len(tbl.Schema.Columns) != 2 || tbl.Schema.PrimaryKey[0] != "k" ||
		len(tbl.Assignment.Buckets) != 2 || tbl.LeaderISR[1].Leader != 1 {
		t.Fatalf("table read back = %+v", tbl)
	}
	if names, _ := c.Tables("db"); len(names) != 2 {
		t.Fatalf("tables = %v", names)
	}
	if _, err := c.Table("db", "zzz"); !errors.Is(err, ErrTableNotExist) {
		t.Fatalf("missing table: %v", err)
	}
	if _, err := c.Table("nodb", "a"); !errors.Is(err, ErrDatabaseNotExist) {
		t.Fatalf("table in missing db: %v", err)
	}
	if _, err := c.Tables("nodb"); !errors.Is(err, ErrDatabaseNotExist) {
		t.Fatalf("tables of missing db: %v", err)
	}

	ops, err = c.DropTableOps("db", "a")
	apply(t, n, ops, err)
	if _, _, err := n.Get(assignmentPath(0)); !errors.Is(err, raftmeta.ErrNoNode) {
		t.Fatalf("assignment of dropped table still there: %v", err)
	}
	if _, err := c.DropDatabaseOps("db", false); !errors.Is(err, ErrDatabaseNotEmpty) {
		t.Fatalf("drop non-empty without cascade: %v", err)
	}
	ops, err = c.DropDatabaseOps("db", true)
	apply(t, n, ops, err)
	if _, _, err := n.Get(assignmentPath(1)); !errors.Is(err, raftmeta.ErrNoNode) {
		t.Fatalf("assignment of cascaded table still there: %v", err)
	}
	if dbs, _ := c.Databases(); len(dbs) != 0 {
		t.Fatalf("databases after drop = %v", dbs)
	}
	// Ids are never reused.
	if id, _, _ := c.NextTableID(); id != 2 {
		t.Fatalf("next id after drops = %d, want 2", id)
	}
}

func TestCorruptZnodeIsAnError(t *testing.T) {
	n := metatest.NewNode(t)
	c := New(n)
	apply(t, n, c.BootstrapOps("cid"), nil)
	apply(t, n, []raftmeta.Op{raftmeta.CreateOp(databasePath("bad"), []byte("{not json"), raftmeta.Persistent)}, nil)
	if _, err := c.Database("bad"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt database znode: %v, want ErrCorrupt", err)
	}
}

func TestCheckWrite(t *testing.T) {
	n := metatest.NewNode(t)
	c := New(n)
	elect, _, _, err := c.ElectOps(1, "127.0.0.1:9123")
	if err != nil {
		t.Fatal(err)
	}
	createDB, err := c.CreateDatabaseOps("db", DatabaseRegistration{})
	if err != nil {
		t.Fatal(err)
	}
	reg := RegisterTabletServerOp(1, TabletServerRegistration{Listeners: Listeners("127.0.0.1:9123")})
	persistentReg := reg
	persistentReg.Mode = raftmeta.Persistent
	epochPath := coordinatorEpochPath
	for _, tc := range []struct {
		name    string
		from    string
		session int64
		ops     []raftmeta.Op
		refused bool
	}{
		{"first coordinator bootstraps and elects", "1", 0, append(c.BootstrapOps("cid"), elect...), false},
		{"bump of the epoch", "1", 0, []raftmeta.Op{raftmeta.SetDataOp(epochPath, []byte("2"), 0), raftmeta.SetDataOp(coordinatorActivePath, nil, -1)}, false},
		{"fenced change", "1", 0, append([]raftmeta.Op{EpochCheck(3)}, createDB...), false},
		{"own registration", "1", 7, []raftmeta.Op{reg}, false},
		{"outside the root", "1", 0, []raftmeta.Op{raftmeta.CreateOp("/stromboli", nil, raftmeta.Persistent), raftmeta.DeleteOp("/x", -1)}, false},
		{"checks only", "1", 0, []raftmeta.Op{raftmeta.CheckOp(Root, -1), raftmeta.CheckOp(epochPath, -1)}, false},

		{"unfenced create", "1", 0, []raftmeta.Op{raftmeta.CreateOp(Root+"/pwned", nil, raftmeta.Persistent)}, true},
		{"unfenced change", "1", 0, createDB, true},
		{"bootstrap without the epoch", "1", 0, c.BootstrapOps("cid"), true},
		{"check of any version fences nothing", "1", 0, append([]raftmeta.Op{raftmeta.CheckOp(epochPath, -1)}, createDB...), true},
		{"unfenced delete of a registration", "1", 0, []raftmeta.Op{raftmeta.DeleteOp(tabletServerIDPath(1), -1)}, true},
		{"another node's registration", "2", 7, []raftmeta.Op{reg}, true},
		{"registration without a session", "1", 0, []raftmeta.Op{reg}, true},
		{"persistent registration", "1", 7, []raftmeta.Op{persistentReg}, true},
		{"registration with more", "1", 7, []raftmeta.Op{reg, raftmeta.SetDataOp(clusterIDPath, nil, -1)}, true},
		{"epoch deleted in a fenced multi", "1", 0, []raftmeta.Op{EpochCheck(3), raftmeta.DeleteOp(epochPath, -1)}, true},
		{"epoch set without a version", "1", 0, []raftmeta.Op{raftmeta.SetDataOp(epochPath, []byte("9"), -1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckWrite(tc.from, tc.session, tc.ops)
			if tc.refused != (err != nil) || (err != nil && !errors.Is(err, ErrUnfencedWrite)) {
				t.Fatalf("CheckWrite = %v, want refused %v", err, tc.refused)
			}
		})
	}
}

// droppingTree runs drop once, just before the first read of path: a
// concurrent drop applied between two of the catalog's reads.
type droppingTree struct {
	Tree
	path string
	drop func()
}

func (d *droppingTree) before(path string) {
	if path == d.path && d.drop != nil {
		d.drop()
		d.drop = nil
	}
}

func (d *droppingTree) Get(path string) ([]byte, raftmeta.Stat, error) {
	d.before(path)
	return d.Tree.Get(path)
}

func (d *droppingTree) Children(path string) ([]string, raftmeta.Stat, error) {
	d.before(path)
	return d.Tree.Children(path)
}

// TestTableDroppedWhileRead: a table dropped after Table has read its
// registration but before its schemas is not found, as if read after the
// drop, rather than an internal error about a missing znode (found by the
// robustness harness: GetTable racing DropTable answered "node does not
// exist: .../schemas").
func TestTableDroppedWhileRead(t *testing.T) {
	for _, path := range []string{schemasPath("db", "a"), schemaPath("db", "a", 1)} {
		n := metatest.NewNode(t)
		c := New(n)
		apply(t, n, c.BootstrapOps("cid"), nil)
		ops, err := c.CreateDatabaseOps("db", DatabaseRegistration{})
		apply(t, n, ops, err)
		id, claim, err := c.NextTableID()
		if err != nil {
			t.Fatal(err)
		}
		ops, err = c.CreateTableOps(NewTable{Database: "db", Name: "a",
			Schema:       record.Schema{Columns: []record.Column{{Name: "k", Type: record.DataType{Root: record.BigInt}}}},
			Registration: TableRegistration{TableID: id, BucketCount: 1},
			Assignment:   &TableAssignment{Buckets: map[int32][]int32{0: {1}}},
		})
		apply(t, n, append([]raftmeta.Op{claim}, ops...), err)
		racing := New(&droppingTree{Tree: n, path: path, drop: func() {
			ops, err := c.DropTableOps("db", "a")
			apply(t, n, ops, err)
		}})
		if _, err := racing.Table("db", "a"); !errors.Is(err, ErrTableNotExist) {
			t.Errorf("dropped before reading %s: %v, want ErrTableNotExist", path, err)
		}
	}
}
