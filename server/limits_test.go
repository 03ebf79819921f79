package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"

	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// dialFrom opens a TCP connection to the node from a loopback address.
func dialFrom(t *testing.T, s *Server, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// healthz sends GET /healthz on c (HTTP/1.1, kept alive) and reports
// whether the node answered it; false when the node closed c instead.
func healthz(t *testing.T, c net.Conn, br *bufio.Reader) bool {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// closedByNode waits until the node closes c (a read ends without data),
// for 5s: many times the timeouts the tests set, half the 10s the node had
// for headers before api.read-timeout.
func closedByNode(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the node did not close the connection")
	}
}

// Connections over max.connections.per.ip, or over max.connections, are
// closed as they are accepted; other clients are served.
func TestAPIConnectionLimits(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Listen = "0.0.0.0:0" // reachable from 127.0.0.2 and 127.0.0.3
	cfg.MaxConnectionsPerIP = 2
	cfg.MaxConnections = 3
	s := startServer(t, cfg)
	var held []net.Conn
	serve := func(from string) bool {
		c := dialFrom(t, s, from)
		held = append(held, c)
		return healthz(t, c, bufio.NewReader(c))
	}
	for i := range 2 {
		if !serve("127.0.0.1") {
			t.Fatalf("connection %d refused within the per-IP limit", i+1)
		}
	}
	if serve("127.0.0.1") {
		t.Fatal("a third connection from one IP was served; max.connections.per.ip is 2")
	}
	if !serve("127.0.0.2") {
		t.Fatal("another IP was refused")
	}
	if serve("127.0.0.3") {
		t.Fatal("a fourth connection was served; max.connections is 3")
	}
	// A place freed is taken again.
	held[0].Close()
	ln := s.apiLn.(interface{ Open() int })
	for deadline := time.Now().Add(10 * time.Second); ln.Open() > 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection still counts")
		}
	}
	if !serve("127.0.0.3") {
		t.Fatal("refused after a connection closed")
	}
}

// A body over netty.server.max-request-size is refused, unread, with a
// Connect error naming the key, on the fast path (known length, or the Go
// client's Strom-Body-Length) and on Connect's; smaller ones are served.
func TestAPIRequestSizeLimit(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxRequestBytes = 64 << 10
	s := startServer(t, cfg)
	const ddl = "id BIGINT, s STRING"
	info := createTable(t, s, "demo", "t", ddl, 1)
	waitReplicas(t, s, info)
	rows := make([]record.Row, 8000)
	for i := range rows {
		rows[i] = record.Row{int64(i), fmt.Sprintf("%x", uint64(i)*0x9e3779b97f4a7c15)}
	}
	big := buildBatch(t, schemaOf(t, ddl), info.SchemaId, rows...)
	if len(big) <= int(cfg.MaxRequestBytes) {
		t.Fatalf("batch of %d bytes is within the limit", len(big))
	}
	small := buildBatch(t, schemaOf(t, ddl), info.SchemaId, rows[:10]...)
	produce := func(c interface {
		ProduceLog(context.Context, *connect.Request[stromv1.ProduceLogRequest]) (*connect.Response[stromv1.ProduceLogResponse], error)
	}, batch []byte) error {
		_, err := c.ProduceLog(context.Background(), connect.NewRequest(&stromv1.ProduceLogRequest{
			Database: "demo", Table: "t", Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: batch}}}))
		return err
	}
	for _, p := range protocols[:2] { // Connect over the fast path (proto) and Connect's handler (JSON)
		c := tabletClient(s, p.opts...)
		err := produce(c, big)
		if connect.CodeOf(err) != connect.CodeResourceExhausted || errDetail(err).GetName() != "LIMIT_EXCEEDED" ||
			!strings.Contains(err.Error(), "netty.server.max-request-size") {
			t.Fatalf("%s: %d-byte batch: want LIMIT_EXCEEDED naming the key, got %v", p.name, len(big), err)
		}
		if err := produce(c, small); err != nil {
			t.Fatalf("%s: small batch after the refusal: %v", p.name, err)
		}
	}
	// A chunked body whose Strom-Body-Length is over the limit.
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr()+produceLogPath, io.NopCloser(bytes.NewReader(make([]byte, 10))))
	req.Header.Set("Content-Type", "application/proto")
	req.Header.Set(bodyLengthHeader, fmt.Sprint(100<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "netty.server.max-request-size") {
		t.Fatalf("chunked body over the limit: %s %s", resp.Status, body)
	}
}

// A client that stalls while sending headers or a body is cut off after
// api.read-timeout; a long-poll fetch longer than that is not.
func TestAPIReadTimeout(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.ReadTimeout = 300 * time.Millisecond
	s := startServer(t, cfg)

	t.Run("headers", func(t *testing.T) {
		c := dialFrom(t, s, "127.0.0.1")
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		closedByNode(t, c, bufio.NewReader(c))
	})
	t.Run("body", func(t *testing.T) {
		c := dialFrom(t, s, "127.0.0.1")
		_, _ = io.WriteString(c, "POST "+produceLogPath+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/proto\r\nContent-Length: 1000\r\n\r\n0123456789")
		br := bufio.NewReader(c)
		// The node answers the call with an error, or just closes.
		if resp, err := http.ReadResponse(br, nil); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("stalled body answered %s", resp.Status)
			}
		}
		closedByNode(t, c, br)
	})

	const ddl = "id BIGINT"
	info := createTable(t, s, "demo", "t", ddl, 1)
	waitReplicas(t, s, info)
	t.Run("slow live upload", func(t *testing.T) {
		body, err := proto.Marshal(&stromv1.ProduceLogRequest{Database: "demo", Table: "t",
			Buckets: []*stromv1.ProduceBucket{{Bucket: 0, Records: buildBatch(t, schemaOf(t, ddl), info.SchemaId, record.Row{int64(1)})}}})
		if err != nil {
			t.Fatal(err)
		}
		// Ten pieces 100ms apart: the whole upload takes longer than
		// api.read-timeout, no wait between bytes does.
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr()+produceLogPath, &tricklingReader{data: body, pieces: 10, gap: 100 * time.Millisecond})
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/proto")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var pr stromv1.ProduceLogResponse
		if resp.StatusCode != http.StatusOK || proto.Unmarshal(out, &pr) != nil || len(pr.Buckets) != 1 || pr.Buckets[0].Error != nil {
			t.Fatalf("slow upload over %s: %s %q", time.Since(start), resp.Status, out)
		}
		if time.Since(start) < cfg.ReadTimeout {
			t.Fatalf("the upload took %s, not longer than api.read-timeout", time.Since(start))
		}
	})
	for _, hc := range []struct {
		name string
		c    *http.Client
	}{{"http1", &http.Client{}}, {"h2c", h2cClient()}} {
		t.Run("long poll over "+hc.name, func(t *testing.T) {
			c := tabletClientOver(hc.c, s)
			start := time.Now()
			resp, err := c.FetchLog(context.Background(), connect.NewRequest(&stromv1.FetchLogRequest{
				Database: "demo", Table: "t", MaxWaitMs: 1500, Buckets: []*stromv1.FetchBucket{{Bucket: 0, Offset: 1}}})) // past the slow upload's record
			if err != nil || resp.Msg.Buckets[0].Error != nil {
				t.Fatalf("long poll: %v %v", resp, err)
			}
			if time.Since(start) < time.Second {
				t.Fatalf("long poll returned after %s; it should have waited 1.5s", time.Since(start))
			}
		})
	}
}

// An API connection with no request in flight for
// netty.connection.max-idle-time is closed.
func TestAPIIdleTimeout(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.IdleTimeout = 200 * time.Millisecond
	s := startServer(t, cfg)
	c := dialFrom(t, s, "127.0.0.1")
	br := bufio.NewReader(c)
	if !healthz(t, c, br) {
		t.Fatal("healthz")
	}
	closedByNode(t, c, br)
}

// The node tells HTTP/2 clients api.http2.max-concurrent-streams.
func TestAPIMaxConcurrentStreams(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxConcurrentStreams = 7
	s := startServer(t, cfg)
	c := dialFrom(t, s, "127.0.0.1")
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != 7 {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (set: %t), want 7", v, ok)
	}
}

func tabletClientOver(hc *http.Client, s *Server) stromv1connect.TabletServiceClient {
	return stromv1connect.NewTabletServiceClient(hc, "http://"+s.Addr())
}

// tricklingReader returns data in pieces, gap apart.
type tricklingReader struct {
	data   []byte
	pieces int
	gap    time.Duration
	sent   int
}

func (r *tricklingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if r.sent > 0 {
		time.Sleep(r.gap) // pacing the upload, not waiting for a condition
	}
	r.sent++
	n := copy(p[:min(len(p), max(len(r.data)/max(r.pieces-r.sent+1, 1), 1))], r.data)
	r.data = r.data[n:]
	return n, nil
}
