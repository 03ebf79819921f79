package server

import (
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
// TCP, with frames bounded by netty.server.max-request-size.
func TestFlussListen(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.FlussListen = freeAddr(t)
	startServer(t, cfg)

	c, err := net.Dial("tcp", cfg.FlussListen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute)) // a hang fails the test instead of the suite
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
