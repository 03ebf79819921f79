package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/tablet/kv"
	"strom/tablet/log"
)

// upsertHistory is what a test wrote to a primary-key table of rows
// (id, balance, note): write i of a key upserts balance i or deletes the
// row; acked is the latest acknowledged write per key.
type upsertHistory struct {
	mu     sync.Mutex
	writes map[int64]map[int64]bool // key -> write index -> is a delete
	acked  map[int64]int64          // key -> index of its latest acknowledged write
	failed map[string]int           // failed writes by error
}

// floor returns, per key, the index of its latest acknowledged write now.
func (h *upsertHistory) floor() map[int64]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int64]int64, len(h.acked))
	for k, i := range h.acked {
		out[k] = i
	}
	return out
}

// check reports whether row, read for key after floor was taken, can be the
// key's state: the result of its latest write acknowledged by then, or of a
// later one (in flight, or failed: a failed write may have been applied).
func (h *upsertHistory) check(key int64, row record.Row, floor map[int64]int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, acked := floor[key]
	if row == nil {
		for i, del := range h.writes[key] {
			if del && i >= f {
				return nil
			}
		}
		if !acked {
			return nil
		}
		return fmt.Errorf("key %d has no row; its write %d was acknowledged (an upsert) and no delete came after it", key, f)
	}
	i := row[1].(int64)
	if del, ok := h.writes[key][i]; !ok || del {
		return fmt.Errorf("key %d holds %v: no upsert %d of that key was written", key, row, i)
	}
	if acked && i < f {
		return fmt.Errorf("key %d holds write %d; write %d was acknowledged after it", key, i, f)
	}
	if want := fmt.Sprintf("write %d", i); row[2] != want {
		return fmt.Errorf("key %d holds %v, want note %q", key, row, want)
	}
	return nil
}

// checkLookups looks up every key 0..keys-1 and checks each against h.
func checkLookups(ctx context.Context, t *testing.T, l *client.Lookuper, h *upsertHistory, keys int64) {
	t.Helper()
	floor := h.floor()
	ks := make([]record.Row, keys)
	for k := range keys {
		ks[k] = record.Row{k}
	}
	rows, err := l.Lookup(ctx, ks...)
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	bad := 0
	for k, r := range rows {
		if err := h.check(int64(k), r, floor); err != nil {
			if bad++; bad <= 10 {
				t.Error(err)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys disagree with the acknowledged writes", bad, keys)
	}
}

// upsertKeys is how many keys upsertLoad writes.
const upsertKeys = 1000

// upsertLoad upserts (and sometimes deletes) random keys of a primary-key
// table of accountsSchema with acks=-1, about 10,000 writes a second, from
// a goroutine, and records the history in h. Write i of a key upserts
// balance i (note "write i") or, one time in ten, deletes it.
type upsertLoad struct {
	w          *client.UpsertWriter
	h          upsertHistory
	stop, done chan struct{}
}

// startUpsertLoad starts an upsertLoad on tbl; seed chooses the keys and
// the deletes; opts are added to the writer's.
func startUpsertLoad(ctx context.Context, t *testing.T, tbl *client.Table, seed uint64, opts ...client.WriterOption) *upsertLoad {
	w, err := tbl.NewUpsertWriter(ctx, append([]client.WriterOption{client.Acks(-1), client.BatchSize(8 << 10),
		client.BatchTimeout(5 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	u := &upsertLoad{w: w, stop: make(chan struct{}), done: make(chan struct{}),
		h: upsertHistory{writes: map[int64]map[int64]bool{}, acked: map[int64]int64{}, failed: map[string]int{}}}
	h := &u.h
	go func() {
		defer close(u.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		rng := rand.New(rand.NewPCG(seed, seed+1))
		for i := int64(0); ; i++ {
			select {
			case <-u.stop:
				_ = w.Flush(ctx)
				return
			default:
			}
			key, del := rng.Int64N(upsertKeys), rng.IntN(10) == 0
			h.mu.Lock()
			if h.writes[key] == nil {
				h.writes[key] = map[int64]bool{}
			}
			h.writes[key][i] = del
			h.mu.Unlock()
			var f *client.Future
			if del {
				f = w.Delete(ctx, record.Row{key, nil, nil})
			} else {
				f = w.Upsert(ctx, record.Row{key, i, fmt.Sprintf("write %d", i)})
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := f.Wait(ctx)
				h.mu.Lock()
				defer h.mu.Unlock()
				if err != nil {
					h.failed[err.Error()]++
				} else if prev, ok := h.acked[key]; !ok || i > prev {
					h.acked[key] = i
				}
			}()
			if i%50 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	return u
}

// finish stops the writer once what it wrote is settled, and returns the
// writer's Close error; h may be read without its lock afterwards.
func (u *upsertLoad) finish(ctx context.Context) error {
	close(u.stop)
	<-u.done
	return u.w.Close(ctx)
}

// TestReplicatedUpsertThroughLeaderSIGKILL: three real processes, a
// primary-key table of replication factor 3 and min ISR 2, an idempotent
// upsert writer with acks=-1 (upserts and some deletes). The leader of
// bucket 0 is SIGKILLed failoverKills times, and restarted
// each time once lookups were checked; before the next kill it is back in
// the ISR. Right after each kill, lookups of every key (bucket 0's from
// its new leader) return the latest acknowledged write of each key, or a
// later one. At the end, every node is stopped and each replica's data
// directory opened offline: its KV is exactly the fold of its changelog
// (kv.Tablet.VerifyFold).
func TestReplicatedUpsertThroughLeaderSIGKILL(t *testing.T) {
	bin := buildStrom(t)
	kills := failoverKills(t)
	ctx, cancel := failoverContext(kills)
	defer cancel()
	rc := startReplicated(ctx, t, bin, client.WithRetryTimeout(60*time.Second))
	const buckets = 2
	tbl := rc.createTable(ctx, "accounts", accountsSchema, buckets)
	ups := startUpsertLoad(ctx, t, tbl, 5, client.DeliveryTimeout(2*time.Minute))
	h := &ups.h
	l, err := tbl.NewLookuper()
	if err != nil {
		t.Fatal(err)
	}
	const keys = upsertKeys

	for k := 1; k <= kills; k++ {
		leader := rc.waitInSync(ctx, "accounts")[0]
		time.Sleep(500 * time.Millisecond) // writes in flight at the kill
		rc.sigkill(leader)
		killed := time.Now()
		next := rc.waitLeaderOtherThan(ctx, "accounts", 0, leader)
		checkLookups(ctx, t, l, h, keys)
		t.Logf("kill %d: SIGKILLed node %d, bucket 0's leader; lookups of all %d keys agree with the acknowledged writes, from new leader %d, %v after the kill",
			k, leader, keys, next, time.Since(killed).Round(time.Millisecond))
		time.Sleep(500 * time.Millisecond) // writes go on against the others
		rc.restart(leader)
	}
	time.Sleep(500 * time.Millisecond)
	if err := ups.finish(ctx); err != nil {
		t.Logf("writer close: %v", err)
	}
	checkLookups(ctx, t, l, h, keys)
	h.mu.Lock()
	t.Logf("%d keys with acknowledged writes; failed writes by error: %v", len(h.acked), h.failed)
	h.mu.Unlock()

	// Every replica, offline: the KV is the fold of its changelog.
	rc.waitInSync(ctx, "accounts")
	ti, err := rc.c.Admin().GetTable(ctx, "e2e", "accounts")
	if err != nil {
		t.Fatal(err)
	}
	desc := descriptorOf(t, ti.Descriptor_)
	for _, id := range rc.ids() {
		if err := rc.nodes[id].kill(syscall.SIGTERM); err != nil {
			t.Fatalf("node %d: SIGTERM: %v", id, err)
		}
		rc.nodes[id].node = nil
	}
	for _, id := range rc.ids() {
		for b := range buckets {
			dir := filepath.Join(rc.nodes[id].dir, "data", "tablets", strconv.FormatInt(ti.TableId, 10), strconv.Itoa(b))
			rows := verifyFoldOffline(t, dir, desc, int16(ti.SchemaId))
			t.Logf("node %d, bucket %d: the KV (%d rows) is the fold of the changelog", id, b, rows)
		}
	}
}

// descriptorOf is the table descriptor d describes, normalized as the
// server stores it.
func descriptorOf(t *testing.T, d *stromv1.TableDescriptor) record.TableDescriptor {
	t.Helper()
	var out record.TableDescriptor
	for _, c := range d.GetSchema().GetColumns() {
		typ, err := record.ParseDataType(c.Type)
		if err != nil {
			t.Fatalf("column %s: %v", c.Name, err)
		}
		out.Schema.Columns = append(out.Schema.Columns, record.Column{Name: c.Name, Type: typ})
	}
	out.Schema.PrimaryKey = d.GetSchema().GetPrimaryKey()
	out.BucketKeys, out.BucketCount, out.Properties = d.BucketKeys, int(d.BucketCount), d.Properties
	norm, err := out.Normalize(1)
	if err != nil {
		t.Fatal(err)
	}
	return norm
}

// verifyFoldOffline opens the replica in dir (a stopped node's
// data/tablets/<table id>/<bucket>) and checks that its KV is the fold of
// its changelog; it returns how many rows the KV holds.
func verifyFoldOffline(t *testing.T, dir string, desc record.TableDescriptor, schemaID int16) int {
	t.Helper()
	lc := log.DefaultConfig()
	lc.Dir = filepath.Join(dir, "log")
	lt, err := log.Open(lc)
	if err != nil {
		t.Fatalf("open the log in %s: %v", dir, err)
	}
	defer lt.Close()
	kt, err := kv.Open(kv.Config{Dir: filepath.Join(dir, "kv"), Log: lt, Table: desc, SchemaID: schemaID})
	if err != nil {
		t.Fatalf("open the KV in %s: %v", dir, err)
	}
	defer kt.Close()
	if err := kt.VerifyFold(); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	rows, err := kt.LimitScan(math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// TestUpsertHistoryCheck: the checker of the test above refuses a stale
// value, a lost row, a value never written and a resurrected delete.
func TestUpsertHistoryCheck(t *testing.T) {
	h := &upsertHistory{writes: map[int64]map[int64]bool{1: {3: false, 5: true, 7: false, 9: false}}, acked: map[int64]int64{1: 7}}
	floor := h.floor()
	row := func(i int64) record.Row { return record.Row{int64(1), i, fmt.Sprintf("write %d", i)} }
	for _, ok := range []record.Row{row(7), row(9)} {
		if err := h.check(1, ok, floor); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range []record.Row{nil, row(3), row(8), {int64(1), int64(9), "write 3"}} {
		if err := h.check(1, bad, floor); err == nil {
			t.Errorf("%v passes the check after write 7 was acknowledged", bad)
		}
	}
	h.acked[1] = 5 // the delete acknowledged last
	if err := h.check(1, nil, h.floor()); err != nil {
		t.Errorf("no row after an acknowledged delete: %v", err)
	}
	if err := h.check(1, row(3), h.floor()); err == nil {
		t.Error("the row deleted by an acknowledged delete passes the check")
	}
}
