package server

import (
	"io"
	"net"
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
// unanswered while the first keeps being served.
func TestFlussListen(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	cfg.MaxConnectionsPerIP = 1
	startServer(t, cfg)

	c := dialFluss(t, cfg.FlussListen)
	apiVersions(t, c)
	over := dialFluss(t, cfg.FlussListen)
	if _, err := wire.NewReader(over, 1<<20, "test").ReadFrame(); err != io.EOF {
		t.Fatalf("a connection over max.connections.per.ip: %v, want it closed (EOF)", err)
	}
	apiVersions(t, c)
}

func dialFluss(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute)) // a hang fails the test instead of the suite
	return c
}

func apiVersions(t *testing.T, c net.Conn) {
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
	cfg.FlussListen = ""
	if err := cfg.Validate(); err != nil {
		t.Fatalf("empty fluss.listen (off): %v", err)
	}
}
