package client_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// deadHost is where deadLeader's metadata says the node is until healed:
// nothing answers there, as when a leader was killed.
const deadHost = "dead-leader.test:9123"

// deadLeader is a transport in front of one real node whose metadata names
// deadHost as the node's API address (so as every bucket's leader) until
// heal, as the metadata does between a leader's death and the election of
// the next one; calls to deadHost are refused.
type deadLeader struct {
	next http.RoundTripper
	real string // host:port of the node

	mu        sync.Mutex
	healed    bool
	metadata  int // GetMetadata calls
	deadCalls int
}

func (d *deadLeader) heal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.healed = true
}

func (d *deadLeader) counts() (metadata, dead int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.metadata, d.deadCalls
}

func (d *deadLeader) RoundTrip(r *http.Request) (*http.Response, error) {
	d.mu.Lock()
	healed := d.healed
	if r.URL.Host == deadHost {
		d.deadCalls++
		d.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	if strings.HasSuffix(r.URL.Path, "/GetMetadata") {
		d.metadata++
	}
	d.mu.Unlock()
	resp, err := d.next.RoundTrip(r)
	if err != nil || healed || !strings.HasSuffix(r.URL.Path, "/GetMetadata") || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var md stromv1.GetMetadataResponse
	if err := proto.Unmarshal(data, &md); err != nil {
		return nil, err
	}
	for _, n := range md.Nodes {
		if n.ApiAddress == d.real {
			n.ApiAddress = deadHost
		}
	}
	if data, err = proto.Marshal(&md); err != nil {
		return nil, err
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// A batch waiting out its retry backoff is sent as soon as the table's
// metadata names a new leader for a bucket, whoever learnt it (Kafka's
// KIP-951): a writer whose backoff is an hour delivers once another
// writer's failed try has read the new leader.
func TestRetryGoesToANewLeaderAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startNode(t)
	createTable(t, c, "demo", "moved", 1, nil, &stromv1.Column{Name: "v", Type: "BIGINT"})
	d := &deadLeader{next: http.DefaultTransport, real: strings.TrimPrefix(c.Address(), "http://")}
	c2, err := client.New(d.real, client.WithHTTPClient(&http.Client{Transport: d}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := c2.Table(ctx, "demo", "moved")
	if err != nil {
		t.Fatal(err)
	}
	slow, err := tbl.NewAppendWriter(ctx, client.RetryBackoff(time.Hour, time.Hour), client.DeliveryTimeout(2*time.Hour),
		client.BatchTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := d.counts()
	waiting := slow.Append(ctx, record.Row{int64(1)})
	// The slow writer's try failed and it read the metadata again (still
	// naming the dead node): it is in its hour of backoff.
	for {
		if md, dead := d.counts(); dead > 0 && md > before {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the slow writer never tried the dead leader")
		case <-time.After(10 * time.Millisecond):
		}
	}
	d.heal()
	fast, err := tbl.NewAppendWriter(ctx, client.BatchTimeout(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fast.Append(ctx, record.Row{int64(2)}).Wait(ctx); err != nil {
		t.Fatalf("the other writer: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, _, err := waiting.Wait(wctx); err != nil {
		t.Fatalf("the batch waiting out an hour's backoff was not sent to the new leader: %v", err)
	}
	for _, w := range []*client.AppendWriter{slow, fast} {
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
