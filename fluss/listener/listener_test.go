package listener

import (
	"errors"
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

func start(t *testing.T) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(ln, Config{MaxRequestBytes: 1024})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t *testing.T, s *Server) (net.Conn, *wire.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute)) // a hang fails the test instead of the suite
	return c, wire.NewReader(c, 1<<20, "test")
}

func request(t *testing.T, key protocol.APIKey, version int16, id int32, body proto.Message) []byte {
	t.Helper()
	b, err := wire.AppendRequest(nil, wire.RequestHeader{APIKey: key, APIVersion: version, RequestID: id}, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func response(t *testing.T, r *wire.Reader) wire.Response {
	t.Helper()
	frame, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := wire.ParseResponse(frame)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

var versionsReq = &flusspb.ApiVersionsRequest{ClientSoftwareName: proto.String("fluss-java-client"), ClientSoftwareVersion: proto.String("0.9.1")}

// Over real TCP, one connection: API_VERSIONS answers the served keys with
// Fluss's ranges; every other request, an unknown key, a bad version and a
// bad body each get an error response with their request id, naming the
// problem, and the connection keeps serving pipelined requests.
func TestAPIVersionsAndErrors(t *testing.T) {
	s := start(t)
	c, r := dial(t, s)
	var out []byte
	out = append(out, request(t, protocol.ApiVersions, 0, 1, versionsReq)...)
	out = append(out, request(t, protocol.ProduceLog, 0, 2, versionsReq)...)
	out = append(out, request(t, 7, 0, 3, versionsReq)...)
	out = append(out, request(t, protocol.ApiVersions, 5, 4, versionsReq)...)
	out = append(out, 0, 0, 0, 11, 0x03, 0xe8, 0, 0, 0, 0, 0, 5, 0x0a, 1, 'x') // API_VERSIONS without client_software_version
	out = append(out, request(t, protocol.ApiVersions, 0, 6, versionsReq)...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}

	// Requests are answered concurrently: responses come in any order.
	got := map[int32]wire.Response{}
	for range 6 {
		resp := response(t, r)
		if _, dup := got[resp.RequestID]; dup {
			t.Fatalf("two responses to request %d", resp.RequestID)
		}
		got[resp.RequestID] = resp
	}
	for _, id := range []int32{1, 6} {
		if got[id].Type != wire.SuccessResponse {
			t.Fatalf("API_VERSIONS %d: %+v", id, got[id])
		}
	}
	var v flusspb.ApiVersionsResponse
	if err := proto.Unmarshal(got[1].Body, &v); err != nil {
		t.Fatal(err)
	}
	if v.ServerType != nil {
		t.Errorf("server_type %d set: a Fluss client would reject a node it dialled in the other role", v.GetServerType())
	}
	versions := map[int32][2]int32{}
	for _, a := range v.GetApiVersions() {
		versions[a.GetApiKey()] = [2]int32{a.GetMinVersion(), a.GetMaxVersion()}
	}
	if len(versions) != len(Served) {
		t.Errorf("%d keys in API_VERSIONS, want %d", len(versions), len(Served))
	}
	for k, want := range map[protocol.APIKey][2]int32{protocol.ApiVersions: {0, 0}, protocol.PutKv: {0, 1}, protocol.Lookup: {0, 1}, protocol.FetchLog: {0, 0}} {
		if versions[int32(k)] != want {
			t.Errorf("%s: versions %v, want %v", k, versions[int32(k)], want)
		}
	}

	for _, w := range []struct {
		id   int32
		code protocol.ErrorCode
		text string
	}{
		{2, protocol.UnsupportedVersion, "does not serve PRODUCE_LOG(1014)"},
		{3, protocol.UnsupportedVersion, "unknown API key 7"},
		{4, protocol.UnsupportedVersion, "API_VERSIONS(1000) version 5 is not supported"},
		{5, protocol.CorruptMessage, "required field"},
	} {
		resp := got[w.id]
		if resp.Type != wire.ErrorResponse {
			t.Fatalf("request %d: %+v, want an error response", w.id, resp)
		}
		e, err := wire.DecodeError(resp.Body)
		if err != nil || protocol.ErrorCode(e.GetErrorCode()) != w.code || !strings.Contains(e.GetErrorMessage(), w.text) {
			t.Errorf("request %d: %v, %v; want %s containing %q", w.id, e, err, w.code, w.text)
		}
	}
}

// A frame over netty.server.max-request-size gets a server failure naming the
// limit and its key, then the connection closes; the listener keeps serving
// new connections.
func TestFrameTooLarge(t *testing.T) {
	s := start(t)
	c, r := dial(t, s)
	if _, err := c.Write([]byte{0, 0, 4, 1}); err != nil { // 1025 bytes
		t.Fatal(err)
	}
	resp := response(t, r)
	if resp.Type != wire.ServerFailure {
		t.Fatalf("%+v, want a server failure", resp)
	}
	e, err := wire.DecodeError(resp.Body)
	if err != nil || protocol.ErrorCode(e.GetErrorCode()) != protocol.CorruptMessage ||
		!strings.Contains(e.GetErrorMessage(), "over the limit of 1024 bytes (netty.server.max-request-size)") {
		t.Fatalf("%v, %v", e, err)
	}
	if _, err := r.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the server failure: %v, want the connection closed", err)
	}

	c2, r2 := dial(t, s)
	if _, err := c2.Write(request(t, protocol.ApiVersions, 0, 1, versionsReq)); err != nil {
		t.Fatal(err)
	}
	if resp := response(t, r2); resp.Type != wire.SuccessResponse {
		t.Fatalf("a new connection: %+v", resp)
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{MaxRequestBytes: 3, IdleTimeout: -1}.Validate()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "netty.server.max-request-size") ||
		!strings.Contains(err.Error(), "netty.connection.max-idle-time") {
		t.Fatalf("Validate = %v, want both problems named", err)
	}
}

// A connection that sends nothing for netty.connection.max-idle-time is
// closed; the test waits for that with a generous deadline.
func TestIdleConnectionClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(ln, Config{MaxRequestBytes: 1024, IdleTimeout: 50 * time.Millisecond})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, r := dial(t, s)
	if _, err := c.Write(request(t, protocol.ApiVersions, 0, 1, versionsReq)); err != nil {
		t.Fatal(err)
	}
	if resp := response(t, r); resp.Type != wire.SuccessResponse {
		t.Fatalf("%+v", resp)
	}
	if _, err := r.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle connection: %v, want it closed by the server (EOF)", err)
	}
}
