package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
	"strom/tablet/replica"
)

// signedOnly serves h only to calls signed with the cluster secret
// (raftmeta.SignForward's headers): an unsigned call is refused with 401,
// a stale or wrongly signed one with 403, before its body is decoded.
func (s *Server) signedOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, body, status, err := raftmeta.ReadSigned(r, s.secret, s.cfg.MaxRequestBytes, time.Now())
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		h.ServeHTTP(w, r)
	})
}

// replicaHandler serves ReplicaService: the leaders' side of replication.
type replicaHandler struct{ s *Server }

func (h *replicaHandler) FetchReplica(ctx context.Context, req *connect.Request[stromv1.FetchReplicaRequest]) (*connect.Response[stromv1.FetchReplicaResponse], error) {
	resp := &stromv1.FetchReplicaResponse{}
	for _, res := range h.fetch(ctx, req.Msg, nil) {
		out := resultMessage(res)
		out.Records = res.Batches
		resp.Buckets = append(resp.Buckets, out)
	}
	return connect.NewResponse(resp), nil
}

// fetch serves a follower's fetch (replica.Manager.FetchAsLeader), the
// batches read into buffers of buffer's (nil: fresh ones); the long poll
// ends when the node stops, so the API drains promptly.
func (h *replicaHandler) fetch(ctx context.Context, m *stromv1.FetchReplicaRequest, buffer func(int) []byte) []replica.BucketFetchResult {
	fr := replica.FetchRequest{Follower: m.FollowerId, Incarnation: m.FollowerIncarnation, MaxWait: time.Duration(m.MaxWaitMs) * time.Millisecond, MaxBytes: int(m.MaxBytes), Buffer: buffer}
	for _, b := range m.Buckets {
		fr.Buckets = append(fr.Buckets, replica.BucketFetch{
			TB: replica.TableBucket{TableID: b.TableId, Bucket: b.Bucket}, LeaderEpoch: b.LeaderEpoch,
			FetchOffset: b.FetchOffset, HighWatermark: b.HighWatermark, MaxBytes: int(b.MaxBytes),
		})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	results := h.s.replicas.FetchAsLeader(ctx, fr)
	h.s.countReplicated(&h.s.metrics.replicationOut, results)
	return results
}

// ReadReplicaRange serves a leader repairing a damaged range of its log
// (replica.Manager.ReadRange): this node's copy, at most
// log.replica.fetch.max-bytes-for-bucket of it (at least one batch).
func (h *replicaHandler) ReadReplicaRange(ctx context.Context, req *connect.Request[stromv1.ReadReplicaRangeRequest]) (*connect.Response[stromv1.ReadReplicaRangeResponse], error) {
	m := req.Msg
	batches, err := h.s.replicas.ReadRange(replica.RangeRequest{
		TB: replica.TableBucket{TableID: m.TableId, Bucket: m.Bucket}, Leader: m.LeaderId, LeaderEpoch: m.LeaderEpoch,
		Offset: m.Offset, EndOffset: m.EndOffset, MaxBytes: int(m.MaxBytes),
	}, int(h.s.cfg.ReplicaFetchMaxBytesForBucket))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.ReadReplicaRangeResponse{Records: batches}), nil
}

func (h *replicaHandler) OffsetForLeaderEpoch(ctx context.Context, req *connect.Request[stromv1.OffsetForLeaderEpochRequest]) (*connect.Response[stromv1.OffsetForLeaderEpochResponse], error) {
	m := req.Msg
	epoch, end, err := h.s.replicas.OffsetForLeaderEpoch(replica.TableBucket{TableID: m.TableId, Bucket: m.Bucket}, m.CurrentLeaderEpoch, m.LeaderEpoch)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&stromv1.OffsetForLeaderEpochResponse{LeaderEpoch: epoch, EndOffset: end}), nil
}

// signingTransport signs every call it sends with the cluster secret.
type signingTransport struct {
	next   http.RoundTripper
	secret []byte
	from   string
}

func (t *signingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	raftmeta.SignForward(r, t.secret, t.from, body, time.Now())
	return t.next.RoundTrip(r)
}

// replicaPeers is replica.Peer over ReplicaService: it calls other nodes
// at the API address their registration (or the gossip) gives.
type replicaPeers struct {
	s       *Server
	http    *http.Client
	clients *peerClients[stromv1connect.ReplicaServiceClient]
	// ranges are the clients of ReadReplicaRange, whose answers are
	// bounded like a fetch answer.
	ranges *peerClients[stromv1connect.ReplicaServiceClient]
	// level is the cluster's active feature level (Server.featureLevel),
	// asked before a call that came with a later level than the first.
	level func() int

	mu   sync.Mutex
	bufs map[int32][]byte // by leader: the last fetch's answer, for the next to read into
}

func newReplicaPeers(s *Server) *replicaPeers {
	hc := s.signedClient(16)
	readMax := int(s.cfg.ReplicaFetchMaxBytesForBucket + 2*s.cfg.MaxRequestBytes + fetchResponseSlack)
	bounded := func(h connect.HTTPClient, url string, opts ...connect.ClientOption) stromv1connect.ReplicaServiceClient {
		return stromv1connect.NewReplicaServiceClient(h, url, append(opts, connect.WithReadMaxBytes(readMax))...)
	}
	return &replicaPeers{s: s, http: hc, clients: newPeerClients(hc, stromv1connect.NewReplicaServiceClient),
		ranges: newPeerClients(hc, bounded), level: s.featureLevel, bufs: map[int32][]byte{}}
}

// peerClients keeps a Connect client of one service per node address, for
// node-to-node calls. Safe for concurrent use.
type peerClients[C any] struct {
	http      *http.Client
	newClient func(connect.HTTPClient, string, ...connect.ClientOption) C

	mu      sync.Mutex
	clients map[string]C // by address
}

func newPeerClients[C any](hc *http.Client, newClient func(connect.HTTPClient, string, ...connect.ClientOption) C) *peerClients[C] {
	return &peerClients[C]{http: hc, newClient: newClient, clients: map[string]C{}}
}

// at is the client of the node at addr.
func (p *peerClients[C]) at(addr string) C {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[addr]
	if !ok {
		c = p.newClient(p.http, "http://"+addr, connect.WithCodec(rpc.Codec{}))
		p.clients[addr] = c
	}
	return c
}

// signedClient is an HTTP client for node-to-node calls: it dials from
// the node's source address and signs every call with the cluster secret,
// keeping up to maxIdle idle connections per node.
func (s *Server) signedClient(maxIdle int) *http.Client {
	t := &http.Transport{
		DialContext:         s.peerDialer().DialContext,
		MaxIdleConnsPerHost: maxIdle,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{Transport: &signingTransport{next: t, secret: s.secret, from: strconv.Itoa(int(s.cfg.NodeID))}}
}

// addr is node's API address.
func (p *replicaPeers) addr(node int32) (string, error) {
	addr := p.s.apiAddrOf(strconv.Itoa(int(node)))
	if addr == "" {
		return "", fmt.Errorf("node %d: no API address known", node)
	}
	return addr, nil
}

// FetchReplica calls the leader's FetchReplica (fetchReplica: its batches
// are read once, and not copied again). The answer is read into the buffer
// of the previous fetch from that leader, whose results are then
// overwritten (replica.Peer allows it); a call while another to the same
// leader runs takes a new one.
func (p *replicaPeers) FetchReplica(ctx context.Context, leader int32, req replica.FetchRequest) ([]replica.BucketFetchResult, error) {
	addr, err := p.addr(leader)
	if err != nil {
		return nil, err
	}
	m := &stromv1.FetchReplicaRequest{FollowerId: req.Follower, FollowerIncarnation: req.Incarnation, MaxWaitMs: int32(req.MaxWait.Milliseconds()), MaxBytes: int32(req.MaxBytes)}
	for _, b := range req.Buckets {
		m.Buckets = append(m.Buckets, &stromv1.FetchReplicaBucket{
			TableId: b.TB.TableID, Bucket: b.TB.Bucket, LeaderEpoch: b.LeaderEpoch,
			FetchOffset: b.FetchOffset, HighWatermark: b.HighWatermark, MaxBytes: int32(b.MaxBytes),
		})
	}
	// The first batch of a bucket is returned whole, whatever the budget: a
	// produced batch (bounded by the request size) or the changelog of an
	// upserted one (-U and +U of each row: twice that).
	p.mu.Lock()
	buf := p.bufs[leader]
	delete(p.bufs, leader)
	p.mu.Unlock()
	results, buf, err := fetchReplica(ctx, p.http, addr, m, int64(req.MaxBytes)+2*p.s.cfg.MaxRequestBytes+fetchResponseSlack, buf)
	p.s.countReplicated(&p.s.metrics.replicationIn, results)
	if buf != nil {
		p.mu.Lock()
		p.bufs[leader] = buf
		p.mu.Unlock()
	}
	return results, err
}

func (p *replicaPeers) OffsetForLeaderEpoch(ctx context.Context, leader int32, tb replica.TableBucket, currentEpoch, epoch int32) (int32, int64, error) {
	addr, err := p.addr(leader)
	if err != nil {
		return 0, 0, err
	}
	resp, err := p.clients.at(addr).OffsetForLeaderEpoch(ctx, connect.NewRequest(&stromv1.OffsetForLeaderEpochRequest{
		FollowerId: p.s.cfg.NodeID, TableId: tb.TableID, Bucket: tb.Bucket, CurrentLeaderEpoch: currentEpoch, LeaderEpoch: epoch,
	}))
	if err != nil {
		return 0, 0, rpc.RemoteErrorOf(err)
	}
	return resp.Msg.LeaderEpoch, resp.Msg.EndOffset, nil
}

// ReadReplicaRange calls node's ReadReplicaRange, for a leader repairing a
// damaged range of its log. The answer is bounded like a fetch's (one
// batch may exceed max_bytes). Below catalog.FeatureLevelReplicaRange (a
// rolling upgrade from a build without the call is not over) nothing is
// sent and the error wraps catalog.ErrFeatureNotActive; should a node that
// predates the call get it anyway, it answers Unimplemented, returned as an
// error too. Either way the leader tries another follower or leaves the
// range refused, and tries again later.
func (p *replicaPeers) ReadReplicaRange(ctx context.Context, node int32, req replica.RangeRequest) ([]byte, error) {
	if err := catalog.CheckFeatureActive("ReadReplicaRange", catalog.FeatureLevelReplicaRange, p.level()); err != nil {
		return nil, err
	}
	addr, err := p.addr(node)
	if err != nil {
		return nil, err
	}
	resp, err := p.ranges.at(addr).ReadReplicaRange(ctx, connect.NewRequest(&stromv1.ReadReplicaRangeRequest{
		LeaderId: req.Leader, TableId: req.TB.TableID, Bucket: req.TB.Bucket, LeaderEpoch: req.LeaderEpoch,
		Offset: req.Offset, EndOffset: req.EndOffset, MaxBytes: int32(min(req.MaxBytes, 1<<30)),
	}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		return nil, fmt.Errorf("node %d has no ReadReplicaRange (a build before feature level %d): %w", node, catalog.FeatureLevelReplicaRange, err)
	}
	if err != nil {
		return nil, rpc.RemoteErrorOf(err)
	}
	return resp.Msg.Records, nil
}
