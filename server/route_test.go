package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// registerFakeNode registers node id at addr in s's metadata, as a node of
// the cluster would register itself (the write is fenced by the
// coordinator epoch, which lets s write another node's registration).
func registerFakeNode(t *testing.T, s *Server, id int32, addr string) {
	t.Helper()
	ctx := context.Background()
	sess, err := s.meta.CreateSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, _, version, err := s.cat.Coordinator()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.meta.Multi(ctx, sess.ID, catalog.EpochCheck(version),
		catalog.RegisterTabletServerOp(id, catalog.TabletServerRegistration{Listeners: catalog.Listeners(addr)})); err != nil {
		t.Fatalf("register node %d: %v", id, err)
	}
}

// A data call for a bucket another node leads answers NOT_LEADER_OR_FOLLOWER
// naming the leader and its API address, per bucket and for a whole call,
// though this node hosts no replica of the bucket.
func TestDataCallOnAnotherLeadersBucket(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	const otherAddr = "127.0.0.1:1"
	registerFakeNode(t, s, 2, otherAddr)
	ctx := context.Background()
	admin := adminClient(s)
	mustCreateDB(t, admin, "demo")
	created, err := admin.CreateTable(ctx, connect.NewRequest(&stromv1.CreateTableRequest{
		Database: "demo", Table: "t",
		Descriptor_: &stromv1.TableDescriptor{Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "a", Type: "INT"}}}, BucketCount: 2},
	}))
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int32{} // bucket → leader
	for _, b := range created.Msg.Table.Buckets {
		leaders[b.Bucket] = b.Leader
	}
	var mine, theirs int32 = -1, -1
	for b, l := range leaders {
		switch l {
		case 1:
			mine = b
		case 2:
			theirs = b
		}
	}
	if mine < 0 || theirs < 0 {
		t.Fatalf("leaders %v: want one bucket on each node", leaders)
	}

	md, err := admin.GetMetadata(ctx, connect.NewRequest(&stromv1.GetMetadataRequest{Tables: []*stromv1.TablePath{{Database: "demo", Table: "t"}}}))
	if err != nil {
		t.Fatalf("get metadata: %v", err)
	}
	if n := md.Msg.Nodes; len(n) != 2 || n[0].Id != 1 || n[0].ApiAddress != s.Addr() || n[1].Id != 2 || n[1].ApiAddress != otherAddr {
		t.Errorf("metadata nodes = %v, want 1 at %s and 2 at %s", n, s.Addr(), otherAddr)
	}
	if md.Msg.Coordinator != 1 || len(md.Msg.Tables) != 1 || len(md.Msg.Tables[0].Buckets) != 2 {
		t.Fatalf("metadata = %v", md.Msg)
	}
	for _, b := range md.Msg.Tables[0].Buckets {
		if b.Leader != leaders[b.Bucket] || len(b.Isr) != 1 || b.Isr[0] != b.Leader || len(b.Replicas) != 1 {
			t.Errorf("metadata of bucket %d = %v, want leader %d alone in the ISR", b.Bucket, b, leaders[b.Bucket])
		}
	}

	wantHint := func(what string, d *stromv1.ErrorDetail) {
		t.Helper()
		if d.GetName() != "NOT_LEADER_OR_FOLLOWER" || !d.GetRetriable() || d.GetLeaderId() != 2 || d.GetLeaderAddress() != otherAddr {
			t.Errorf("%s: error %v, want NOT_LEADER_OR_FOLLOWER naming node 2 at %s", what, d, otherAddr)
		}
	}
	tablet := tabletClient(s)
	// The bucket this node leads is served (once its replica is open).
	var offsets *stromv1.ListOffsetsResponse
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := tablet.ListOffsets(ctx, connect.NewRequest(&stromv1.ListOffsetsRequest{Database: "demo", Table: "t", Buckets: []int32{mine, theirs}}))
		if err != nil {
			t.Fatalf("list offsets: %v", err)
		}
		offsets = resp.Msg
		if offsets.Buckets[0].Error == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if offsets.Buckets[0].Error != nil {
		t.Errorf("own bucket %d: %v", mine, offsets.Buckets[0].Error)
	}
	wantHint("ListOffsets of the other node's bucket", offsets.Buckets[1].Error)

	fetch, err := tablet.FetchLog(ctx, connect.NewRequest(&stromv1.FetchLogRequest{Database: "demo", Table: "t", Buckets: []*stromv1.FetchBucket{{Bucket: theirs}}}))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	wantHint("FetchLog", fetch.Msg.Buckets[0].Error)
	_, err = tablet.LimitScan(ctx, connect.NewRequest(&stromv1.LimitScanRequest{Database: "demo", Table: "t", Bucket: theirs, Limit: 1}))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("LimitScan: %v, want Unavailable", err)
	}
	wantHint("LimitScan", errDetail(err))
}

// proxyHandler serves s's API with admin writes proxied to the node that
// coordinator names.
func proxyHandler(s *Server, coordinator func() (id, addr string)) http.Handler {
	p := newCoordinatorProxy(s)
	p.coordinator = coordinator
	mux := http.NewServeMux()
	mux.Handle(stromv1connect.NewAdminServiceHandler(&adminHandler{s: s, proxy: p}, s.connectOptions()...))
	mux.Handle(stromv1connect.NewTabletServiceHandler(&tabletHandler{s: s, proxy: p}, s.connectOptions()...))
	return mux
}

// newFront serves h over HTTP/1.1 and HTTP/2 without TLS, as a node does.
func newFront(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func hostOf(srv *httptest.Server) string { return srv.Listener.Addr().String() }

// Admin writes and InitWriter on a node that is not the coordinator are
// served by the coordinator's node; a call is proxied once at most.
func TestAdminWritesAreProxiedToTheCoordinator(t *testing.T) {
	a := startServer(t, testConfig(t, t.TempDir()))
	b := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	// b's proxy names a as the coordinator, a's names b: were a proxied
	// call proxied again, it would go round until its deadline.
	var aFront, bFront *httptest.Server
	bFront = newFront(t, proxyHandler(b, func() (string, string) { return "1", hostOf(aFront) }))
	aFront = newFront(t, proxyHandler(a, func() (string, string) { return "2", hostOf(bFront) }))

	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			viaA := stromv1connect.NewAdminServiceClient(h2cClient(), aFront.URL, p.opts...)
			db := "db_" + strconv.Itoa(len(p.name)) + p.name[:4]
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := viaA.CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: db})); err != nil {
				t.Fatalf("create database through a: %v", err)
			}
			if _, err := b.cat.Database(db); err != nil {
				t.Errorf("database on b (the coordinator): %v", err)
			}
			if _, err := a.cat.Database(db); !errors.Is(err, catalog.ErrDatabaseNotExist) {
				t.Errorf("database on a: %v, want it created on b alone", err)
			}
			// The coordinator's answer comes back as it is.
			_, err := viaA.CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: db}))
			if errDetail(err).GetName() != "DATABASE_ALREADY_EXIST" {
				t.Errorf("create again: %v, want DATABASE_ALREADY_EXIST from b", err)
			}
		})
	}
	tablet := stromv1connect.NewTabletServiceClient(h2cClient(), aFront.URL)
	before, _, err := b.cat.NextWriterID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tablet.InitWriter(ctx, connect.NewRequest(&stromv1.InitWriterRequest{})); err != nil {
		t.Fatalf("init writer through a: %v", err)
	}
	if after, _, _ := b.cat.NextWriterID(); after == before {
		t.Errorf("b's next writer id is still %d: InitWriter was not served by b", after)
	}
}

// stubCoordinator records what a proxied CreateDatabase brought.
type stubCoordinator struct {
	stromv1connect.UnimplementedAdminServiceHandler
	calls chan http.Header
	left  chan time.Duration // time to the call's deadline
}

func (c *stubCoordinator) CreateDatabase(ctx context.Context, req *connect.Request[stromv1.CreateDatabaseRequest]) (*connect.Response[stromv1.CreateDatabaseResponse], error) {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now()
	}
	c.calls <- req.Header()
	c.left <- time.Until(d)
	return nil, catalog.ErrDatabaseExists
}

// A proxied call keeps the caller's deadline; a coordinator that cannot be
// reached is NOT_COORDINATOR, retriable.
func TestProxyKeepsTheDeadline(t *testing.T) {
	a := startServer(t, testConfig(t, t.TempDir()))
	stub := &stubCoordinator{calls: make(chan http.Header, 1), left: make(chan time.Duration, 1)}
	mux := http.NewServeMux()
	mux.Handle(stromv1connect.NewAdminServiceHandler(stub, connect.WithInterceptors(rpc.ErrorInterceptor())))
	coord := newFront(t, mux)
	front := newFront(t, proxyHandler(a, func() (string, string) { return "2", hostOf(coord) }))
	c := stromv1connect.NewAdminServiceClient(h2cClient(), front.URL)

	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, err := c.CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: "demo"}))
	if errDetail(err).GetName() != "DATABASE_ALREADY_EXIST" {
		t.Errorf("proxied call: %v, want the coordinator's DATABASE_ALREADY_EXIST", err)
	}
	select {
	case h := <-stub.calls: // sent before the stub answered
		if h.Get(proxiedHeader) != "1" {
			t.Errorf("%s = %q, want node 1", proxiedHeader, h.Get(proxiedHeader))
		}
		if left := <-stub.left; left <= 59*time.Minute || left > time.Hour {
			t.Errorf("deadline at the coordinator in %s, want the caller's hour", left)
		}
	default:
		t.Fatal("the call did not reach the coordinator")
	}

	gone := freeAddr(t)
	front2 := newFront(t, proxyHandler(a, func() (string, string) { return "2", gone }))
	_, err = stromv1connect.NewAdminServiceClient(h2cClient(), front2.URL).CreateDatabase(ctx, connect.NewRequest(&stromv1.CreateDatabaseRequest{Database: "demo"}))
	if d := errDetail(err); d.GetName() != "NOT_COORDINATOR_LEADER_EXCEPTION" || !d.GetRetriable() {
		t.Errorf("coordinator unreachable: %v, want NOT_COORDINATOR_LEADER_EXCEPTION, retriable", err)
	}
}

// In a cluster of three real nodes, a node that is not the coordinator
// serves admin writes (proxied) and describes every node; a data call for
// a bucket another node leads names that node's API address, where the
// call is served.
func TestClusterAnyNodeServesAnyCall(t *testing.T) {
	servers, _ := startCluster(t, 3)
	ctx := context.Background()
	var other *Server // not the coordinator
	poll(t, "a coordinator, and every node registered", func() bool {
		other = nil
		inOffice := 0
		for _, s := range servers {
			if s.coord.Epoch() != 0 {
				inOffice++
			} else if ts, err := s.cat.TabletServers(); err == nil && len(ts) == 3 {
				other = s
			}
		}
		return inOffice == 1 && other != nil
	})
	admin := adminClient(other)
	mustCreateDB(t, admin, "demo")
	created, err := admin.CreateTable(ctx, connect.NewRequest(&stromv1.CreateTableRequest{
		Database: "demo", Table: "t",
		Descriptor_: &stromv1.TableDescriptor{Schema: &stromv1.Schema{Columns: []*stromv1.Column{{Name: "a", Type: "INT"}}}, BucketCount: 3},
	}))
	if err != nil {
		t.Fatalf("create table through node %d (not the coordinator): %v", other.cfg.NodeID, err)
	}

	cl, err := admin.DescribeCluster(ctx, connect.NewRequest(&stromv1.DescribeClusterRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Msg.Nodes) != 3 || len(cl.Msg.Voters) != 3 {
		t.Fatalf("describe cluster = %v, want 3 nodes, 3 voters", cl.Msg)
	}
	coordinators := 0
	for _, n := range cl.Msg.Nodes {
		if !n.Alive || n.Version != Version || n.GossipAddress == "" || n.ApiAddress == "" || n.RaftAddress == "" {
			t.Errorf("node %d = %v, want alive with its version and addresses", n.Id, n)
		}
		if contains(n.Roles, "coordinator") {
			coordinators++
		}
	}
	if coordinators != 1 {
		t.Errorf("describe cluster names %d coordinators, want 1: %v", coordinators, cl.Msg.Nodes)
	}

	addrOf := map[int32]string{}
	for _, s := range servers {
		addrOf[s.cfg.NodeID] = s.Addr()
	}
	md, err := admin.GetMetadata(ctx, connect.NewRequest(&stromv1.GetMetadataRequest{Tables: []*stromv1.TablePath{{Database: "demo", Table: "t"}}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Msg.Nodes) != 3 || len(md.Msg.Tables) != 1 || md.Msg.Tables[0].TableId != created.Msg.Table.TableId {
		t.Fatalf("metadata = %v", md.Msg)
	}
	var elsewhere *stromv1.BucketAssignment
	for _, b := range md.Msg.Tables[0].Buckets {
		if b.Leader != other.cfg.NodeID && b.Leader >= 0 {
			elsewhere = b
		}
	}
	if elsewhere == nil {
		t.Fatalf("every bucket on node %d: %v", other.cfg.NodeID, md.Msg.Tables[0].Buckets)
	}
	req := &stromv1.ListOffsetsRequest{Database: "demo", Table: "t", Buckets: []int32{elsewhere.Bucket}}
	resp, err := tabletClient(other).ListOffsets(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Msg.Buckets[0].Error; d.GetName() != "NOT_LEADER_OR_FOLLOWER" || d.GetLeaderId() != elsewhere.Leader || d.GetLeaderAddress() != addrOf[elsewhere.Leader] {
		t.Fatalf("bucket %d on node %d: %v, want NOT_LEADER_OR_FOLLOWER naming node %d at %s", elsewhere.Bucket, other.cfg.NodeID, d, elsewhere.Leader, addrOf[elsewhere.Leader])
	}
	leader := stromv1connect.NewTabletServiceClient(h2cClient(), "http://"+resp.Msg.Buckets[0].Error.LeaderAddress)
	poll(t, "the leader serving the bucket", func() bool {
		resp, err := leader.ListOffsets(ctx, connect.NewRequest(req))
		return err == nil && resp.Msg.Buckets[0].Error == nil
	})

	// JSON rows without a bucket key (curl's way) go to a bucket the node
	// leads: any node takes them. (Chosen among all three buckets, ten
	// requests would all land on this node's one with odds of 1 in 59049.)
	own := stromv1connect.NewTabletServiceClient(h2cClient(), "http://"+other.Addr())
	poll(t, "node serving its own bucket", func() bool {
		resp, err := own.ListOffsets(ctx, connect.NewRequest(&stromv1.ListOffsetsRequest{Database: "demo", Table: "t"}))
		if err != nil {
			return false
		}
		for _, b := range resp.Msg.Buckets {
			if b.Error == nil {
				return true
			}
		}
		return false
	})
	for i := range 10 {
		resp, err := own.ProduceLog(ctx, connect.NewRequest(&stromv1.ProduceLogRequest{Database: "demo", Table: "t", Rows: rowsOf(t, `{"a": 1}`)}))
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.Msg.Buckets[0].Error; e != nil {
			t.Fatalf("JSON rows %d on node %d: bucket %d: %v", i, other.cfg.NodeID, resp.Msg.Buckets[0].Bucket, e)
		}
	}
}
