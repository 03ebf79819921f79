package client

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// node is one Strom node's API. The nodes of a Client share its HTTP
// transport, which keeps a pool of connections per node.
type node struct {
	base   string // URL
	admin  stromv1connect.AdminServiceClient
	tablet stromv1connect.TabletServiceClient
}

// nodes holds a Client's nodes by URL, made as they are first needed.
type nodes struct {
	mu sync.Mutex
	m  map[string]*node
}

// nodeAt returns the node at base (a URL), made on first use.
func (c *Client) nodeAt(base string) *node {
	c.nodes.mu.Lock()
	defer c.nodes.mu.Unlock()
	if n := c.nodes.m[base]; n != nil {
		return n
	}
	n := &node{
		base:   base,
		admin:  stromv1connect.NewAdminServiceClient(c.http, base, c.connectOpts...),
		tablet: stromv1connect.NewTabletServiceClient(c.http, base, c.connectOpts...),
	}
	c.nodes.m[base] = n
	return n
}

// apiNode returns the node at a registered API address (host:port), with
// the scheme of the bootstrap servers.
func (c *Client) apiNode(addr string) *node { return c.nodeAt(c.scheme + "://" + addr) }

// seed returns the bootstrap server that admin calls, InitWriter and
// metadata go to: the one that last answered.
func (c *Client) seed() *node { return c.seeds[int(c.seedAt.Load())%len(c.seeds)] }

// unreachable moves on from seed n to the next bootstrap server (n cannot
// be reached, or failed a call with a retriable error), unless another
// caller has already.
func (c *Client) unreachable(n *node) {
	i := c.seedAt.Load()
	if c.seeds[int(i)%len(c.seeds)] == n {
		c.seedAt.CompareAndSwap(i, i+1)
	}
}

// rpcFunc is a generated client method bound to its node.
type rpcFunc[Req, Resp any] = func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error)

// method picks a generated client method of a node.
type method[Req, Resp any] = func(*node) rpcFunc[Req, Resp]

type (
	adminAPI  = stromv1connect.AdminServiceClient
	tabletAPI = stromv1connect.TabletServiceClient
)

// viaAdmin is the method picker of an AdminService method (a method
// expression, adminAPI.GetTable).
func viaAdmin[Req, Resp any](m func(adminAPI, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error)) method[Req, Resp] {
	return func(n *node) rpcFunc[Req, Resp] {
		return func(ctx context.Context, r *connect.Request[Req]) (*connect.Response[Resp], error) {
			return m(n.admin, ctx, r)
		}
	}
}

// viaTablet is the method picker of a TabletService method.
func viaTablet[Req, Resp any](m func(tabletAPI, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error)) method[Req, Resp] {
	return func(n *node) rpcFunc[Req, Resp] {
		return func(ctx context.Context, r *connect.Request[Req]) (*connect.Response[Resp], error) {
			return m(n.tablet, ctx, r)
		}
	}
}

// callSeed sends req with m to a bootstrap server, moving on to the next
// one when a server cannot be reached or fails with a retriable error (a
// node cut off from the others but not from the client answers "not the
// coordinator" until it is reachable again: the next server may answer at
// once), again (see retry) while it fails with a retriable error, until
// ctx ends or the client's retry timeout has passed since the first try. For admin calls and InitWriter: any node
// serves them (a node proxies writes to the coordinator). A mutating call
// whose answer was lost may, sent again, report that its effect exists
// already (as with Kafka's admin client).
func callSeed[Req, Resp any](ctx context.Context, c *Client, m method[Req, Resp], req *Req) (*Resp, error) {
	return retry(ctx, time.Now().Add(c.retryTimeout), c.onRetry, func(ctx context.Context) (*Resp, error) {
		n := c.seed()
		resp, err := callOnce(ctx, n, m(n), req)
		if err != nil && retriable(err) {
			c.unreachable(n)
		}
		return resp, err
	})
}

// callLeader sends req with m to the leader of bucket, and retries as
// callSeed does, routing each try by what the last one taught (reroute).
// bucketErr, when not nil, returns the error of the bucket's result in an
// answer (nil if none): such an error counts as the call's, retried and
// rerouted the same way (the node may not host the bucket yet, or no
// longer lead it).
func callLeader[Req, Resp any](ctx context.Context, t *Table, bucket int32, m method[Req, Resp], req *Req, bucketErr func(*Resp) *stromv1.ErrorDetail) (*Resp, error) {
	return retry(ctx, time.Now().Add(t.c.retryTimeout), t.c.onRetry, func(ctx context.Context) (*Resp, error) {
		r, n := t.leader(bucket)
		resp, err := callOnce(ctx, n, m(n), req)
		if err == nil && bucketErr != nil {
			if d := bucketErr(resp); d != nil {
				resp, err = nil, detailError(d)
			}
		}
		t.reroute(ctx, r, bucket, err)
		return resp, err
	})
}

// onlyBucketError is the error of the one bucket's result in results (nil
// if it has none, or results are not one): callLeader's bucketErr.
func onlyBucketError[R interface{ GetError() *stromv1.ErrorDetail }](results []R) *stromv1.ErrorDetail {
	if len(results) != 1 {
		return nil
	}
	return results[0].GetError()
}

// route is what a Table sends by: each bucket's leader. It is never
// changed once published; changes publish a new one.
type route struct {
	leaders []*node // by bucket; nil where no leader is known
}

// leader returns the route in use and the node leading bucket (a
// bootstrap server when no leader is known: it answers with one).
func (t *Table) leader(bucket int32) (*route, *node) {
	r := t.route.Load()
	if bucket >= 0 && int(bucket) < len(r.leaders) && r.leaders[bucket] != nil {
		return r, r.leaders[bucket]
	}
	return r, t.c.seed()
}

// byLeader groups buckets by their leader, as the route in use says.
func (t *Table) byLeader(buckets []int32) (*route, map[*node][]int32) {
	groups := make(map[*node][]int32, 1)
	var r *route
	for _, b := range buckets {
		var n *node
		r, n = t.leader(b)
		groups[n] = append(groups[n], b)
	}
	return r, groups
}

// eachNode runs fn for each node's buckets, concurrently when there are
// several nodes (a long-poll fetch on one must not hold up the others).
func eachNode(groups map[*node][]int32, fn func(n *node, buckets []int32)) {
	if len(groups) == 1 {
		for n, bs := range groups {
			fn(n, bs)
		}
		return
	}
	var wg sync.WaitGroup
	for n, bs := range groups {
		wg.Go(func() { fn(n, bs) })
	}
	wg.Wait()
}

// newRoute is the route the metadata of a table gives.
func (c *Client) newRoute(info *stromv1.TableInfo, nodes []*stromv1.Node) *route {
	addrs := make(map[int32]string, len(nodes))
	for _, n := range nodes {
		addrs[n.Id] = n.ApiAddress
	}
	r := &route{leaders: make([]*node, info.GetDescriptor_().GetBucketCount())}
	for _, b := range info.Buckets {
		if a := addrs[b.Leader]; a != "" && b.Bucket >= 0 && int(b.Bucket) < len(r.leaders) {
			r.leaders[b.Bucket] = c.apiNode(a)
		}
	}
	return r
}

// reroute learns from a try of bucket that went by route r and failed
// with err (nothing when err is nil). A NOT_LEADER_OR_FOLLOWER naming the
// leader moves the bucket there at once; one naming none,
// UNKNOWN_TABLE_OR_BUCKET, NODE_NOT_READY and a node that cannot be reached
// have the table's metadata read again, unless the route changed since r
// (another try learnt first).
func (t *Table) reroute(ctx context.Context, r *route, bucket int32, err error) {
	if err == nil {
		return
	}
	var e *Error
	switch {
	case errors.As(err, &e) && e.Name == nameNotLeader && e.LeaderAddress != "":
		leaders := append([]*node(nil), r.leaders...)
		if int(bucket) < len(leaders) {
			leaders[bucket] = t.c.apiNode(e.LeaderAddress)
			t.publish(r, &route{leaders: leaders})
		}
	case e != nil && (e.Name == nameNotLeader || e.Name == nameUnknownBucket || e.Name == nameNotReady),
		errors.Is(err, ErrUnreachable):
		t.refresh(ctx, r)
	}
}

// Error names that change where a request goes.
const (
	nameNotLeader     = "NOT_LEADER_OR_FOLLOWER"
	nameUnknownBucket = "UNKNOWN_TABLE_OR_BUCKET_EXCEPTION"
	nameNotReady      = "NODE_NOT_READY"
)

// refresh reads the table's leaders again, unless the route in use is no
// longer r. A failure leaves the route as it is: the next failed try
// refreshes again.
func (t *Table) refresh(ctx context.Context, r *route) {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	if t.route.Load() != r {
		return
	}
	md, err := t.c.metadata(ctx, t.info.Database, t.info.Table)
	if err != nil {
		return
	}
	t.publish(r, t.c.newRoute(md.Tables[0], md.Nodes))
}

// metadata asks a bootstrap server for the metadata of db.table, once.
func (c *Client) metadata(ctx context.Context, db, table string) (*stromv1.GetMetadataResponse, error) {
	n := c.seed()
	md, err := callOnce(ctx, n, n.admin.GetMetadata, &stromv1.GetMetadataRequest{
		Tables: []*stromv1.TablePath{{Database: db, Table: table}},
	})
	if errors.Is(err, ErrUnreachable) {
		c.unreachable(n)
	}
	if err == nil && len(md.Tables) != 1 {
		return nil, errors.New("client: metadata answered no table")
	}
	return md, err
}

// routeTable is a Table's routing state.
type routeTable struct {
	route     atomic.Pointer[route]
	refreshMu sync.Mutex // one refresh at a time
	moved     struct {
		sync.Mutex
		c chan struct{} // closed when a bucket's leader changes; nil: none made yet
	}
}

// publish makes next the route in use if old still is, and then, if a
// bucket's leader differs between them, closes the channels leaderMoved
// has handed out.
func (t *routeTable) publish(old, next *route) {
	if !t.route.CompareAndSwap(old, next) || slices.Equal(old.leaders, next.leaders) {
		return
	}
	t.moved.Lock()
	defer t.moved.Unlock()
	if t.moved.c != nil {
		close(t.moved.c)
		t.moved.c = nil
	}
}

// leaderMoved returns a channel that is closed once a route naming another
// leader for some bucket than the route in use now is published. A retry
// waiting out its backoff selects on it.
func (t *routeTable) leaderMoved() <-chan struct{} {
	t.moved.Lock()
	defer t.moved.Unlock()
	if t.moved.c == nil {
		t.moved.c = make(chan struct{})
	}
	return t.moved.c
}
