package server

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/fluss/wire"
)

// A node with fluss.listen answers a Fluss client's API_VERSIONS over real
// TCP, and the port has the API port's connection caps
// (max.connections.per.ip): a second connection from the same IP is closed
// unanswered while the first keeps being served. GET_METADATA gives the
// node's fluss.advertise address.
func TestFlussListen(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	cfg.FlussAdvertise = "fluss.example:19123"
	cfg.MaxConnectionsPerIP = 1
	startServer(t, cfg)

	c := dialFluss(t, cfg.FlussListen)
	apiVersions(t, c)
	over := dialFluss(t, cfg.FlussListen)
	if _, err := wire.NewReader(over, 1<<20, "test").ReadFrame(); err != io.EOF {
		t.Fatalf("a connection over max.connections.per.ip: %v, want it closed (EOF)", err)
	}
	apiVersions(t, c)
	var md flusspb.MetadataResponse
	if code := flussCall(t, c, protocol.GetMetadata, &flusspb.MetadataRequest{}, &md); code != protocol.None {
		t.Fatalf("GET_METADATA: %s", code)
	}
	if ts := md.GetTabletServers(); len(ts) != 1 || ts[0].GetHost() != "fluss.example" || ts[0].GetPort() != 19123 {
		t.Fatalf("tablet_servers %v, want fluss.advertise fluss.example:19123", ts)
	}
}

func dialFluss(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute)) // a hang fails the test instead of the suite
	return c
}

func apiVersions(t testing.TB, c net.Conn) {
	t.Helper()
	req, err := wire.AppendRequest(nil, wire.RequestHeader{APIKey: protocol.ApiVersions, RequestID: 42},
		&flusspb.ApiVersionsRequest{ClientSoftwareName: proto.String("fluss-java-client"), ClientSoftwareVersion: proto.String("0.9.1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	frame, err := wire.NewReader(c, 1<<20, "test").ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := wire.ParseResponse(frame)
	if err != nil || resp.Type != wire.SuccessResponse || resp.RequestID != 42 {
		t.Fatalf("%+v, %v", resp, err)
	}
	var v flusspb.ApiVersionsResponse
	if err := proto.Unmarshal(resp.Body, &v); err != nil || len(v.GetApiVersions()) == 0 {
		t.Fatalf("ApiVersionsResponse %v, %v", &v, err)
	}
}

func TestFlussListenValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FlussListen = "nonsense"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "fluss.listen (--fluss-listen)") {
		t.Fatalf("Validate = %v, want it to name fluss.listen", err)
	}
	cfg.FlussListen = "127.0.0.1:0"
	cfg.FlussAdvertise = "no-port"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "fluss.advertise") {
		t.Fatalf("Validate = %v, want it to name fluss.advertise", err)
	}
	cfg.FlussListen, cfg.FlussAdvertise = "", ""
	if err := cfg.Validate(); err != nil {
		t.Fatalf("empty fluss.listen (off): %v", err)
	}
}

// flussCall sends one request on c and decodes a success into into; it
// returns the error code of an error response (None on success).
func flussCall(t testing.TB, c net.Conn, key protocol.APIKey, req, into proto.Message) protocol.ErrorCode {
	t.Helper()
	out, err := wire.AppendRequest(nil, wire.RequestHeader{APIKey: key, RequestID: 1}, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	frame, err := wire.NewReader(c, 1<<20, "test").ReadFrame()
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	resp, err := wire.ParseResponse(frame)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Type != wire.SuccessResponse {
		e, err := wire.DecodeError(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s: %s", key, protocol.ErrorCode(e.GetErrorCode()), e.GetErrorMessage())
		return protocol.ErrorCode(e.GetErrorCode())
	}
	if err := proto.Unmarshal(resp.Body, into); err != nil {
		t.Fatal(err)
	}
	return protocol.None
}

// On a three-node cluster each node's Fluss listener is a tablet server at
// its own fluss address, GET_METADATA names the node holding the
// coordinator role, and catalog writes sent to a node that is not the
// coordinator go through the coordinator: a database and table created on
// one node are there, with bucket leaders, when asked on another, and a
// drop on the first is seen on the other.
func TestFlussCluster(t *testing.T) {
	gossip := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	cfgs := make([]Config, 3)
	for i := range cfgs {
		cfgs[i] = clusterConfig(t, t.TempDir(), int32(i+1), gossip[i], 3, gossip...)
		cfgs[i].FlussListen = "127.0.0.1:0"
	}
	servers := startConfigs(t, cfgs)
	var coord int32 = -1
	poll(t, "a coordinator", func() bool {
		for _, s := range servers {
			if s.IsCoordinator() {
				coord = s.cfg.NodeID
			}
		}
		return coord >= 0
	})
	var writer, reader *Server // two nodes that are not the coordinator
	for _, s := range servers {
		if s.cfg.NodeID == coord {
			continue
		}
		if writer == nil {
			writer = s
		} else {
			reader = s
		}
	}
	w, r := dialFluss(t, writer.FlussAddr()), dialFluss(t, reader.FlussAddr())

	var md flusspb.MetadataResponse
	poll(t, "three tablet servers in GET_METADATA", func() bool {
		if flussCall(t, r, protocol.GetMetadata, &flusspb.MetadataRequest{}, &md) != protocol.None {
			return false
		}
		return len(md.GetTabletServers()) == 3
	})
	if md.GetCoordinatorServer().GetNodeId() != coord {
		t.Fatalf("coordinator_server %v, want node %d", md.GetCoordinatorServer(), coord)
	}
	for _, n := range md.GetTabletServers() {
		s := servers[n.GetNodeId()-1]
		if got := net.JoinHostPort(n.GetHost(), strconv.Itoa(int(n.GetPort()))); got != s.FlussAddr() {
			t.Errorf("node %d at %s, want its fluss address %s", n.GetNodeId(), got, s.FlussAddr())
		}
	}

	if code := flussCall(t, w, protocol.CreateDatabase, &flusspb.CreateDatabaseRequest{DatabaseName: proto.String("c1"), IgnoreIfExists: proto.Bool(false)},
		&flusspb.CreateDatabaseResponse{}); code != protocol.None {
		t.Fatalf("CREATE_DATABASE on node %d (not the coordinator): %s", writer.cfg.NodeID, code)
	}
	tj := `{"version":1,"schema":{"version":1,"columns":[{"name":"a","data_type":{"type":"BIGINT"},"id":0}],"highest_field_id":0},"bucket_count":3,"properties":{"table.replication.factor":"3"}}`
	if code := flussCall(t, w, protocol.CreateTable, &flusspb.CreateTableRequest{TablePath: &flusspb.PbTablePath{DatabaseName: proto.String("c1"), TableName: proto.String("t")},
		TableJson: []byte(tj), IgnoreIfExists: proto.Bool(false)}, &flusspb.CreateTableResponse{}); code != protocol.None {
		t.Fatalf("CREATE_TABLE on node %d: %s", writer.cfg.NodeID, code)
	}
	var tm []*flusspb.PbTableMetadata
	poll(t, "c1.t's bucket leaders on another node", func() bool {
		md.Reset()
		if flussCall(t, r, protocol.GetMetadata, &flusspb.MetadataRequest{TablePath: []*flusspb.PbTablePath{{DatabaseName: proto.String("c1"), TableName: proto.String("t")}}}, &md) != protocol.None {
			return false
		}
		tm = md.GetTableMetadata()
		for _, b := range tm[0].GetBucketMetadata() {
			if b.LeaderId == nil || len(b.GetReplicaId()) != 3 {
				return false
			}
		}
		return len(tm[0].GetBucketMetadata()) == 3
	})
	if code := flussCall(t, w, protocol.DropDatabase, &flusspb.DropDatabaseRequest{DatabaseName: proto.String("c1"), IgnoreIfNotExists: proto.Bool(false), Cascade: proto.Bool(true)},
		&flusspb.DropDatabaseResponse{}); code != protocol.None {
		t.Fatalf("DROP_DATABASE on node %d: %s", writer.cfg.NodeID, code)
	}
	var ex flusspb.DatabaseExistsResponse
	if code := flussCall(t, r, protocol.DatabaseExists, &flusspb.DatabaseExistsRequest{DatabaseName: proto.String("c1")}, &ex); code != protocol.None || ex.GetExists() {
		t.Fatalf("DATABASE_EXISTS c1 on node %d after the drop: %s %v, want false", reader.cfg.NodeID, code, ex.GetExists())
	}
}
