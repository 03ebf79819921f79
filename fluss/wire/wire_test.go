package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
)

// The exact bytes of an API_VERSIONS request as Fluss's MessageCodec
// encodeRequest writes them: length 8+body, key 1000, version 0, id 7.
func TestRequestBytes(t *testing.T) {
	req := &flusspb.ApiVersionsRequest{ClientSoftwareName: proto.String("j"), ClientSoftwareVersion: proto.String("1")}
	got, err := AppendRequest(nil, RequestHeader{APIKey: protocol.ApiVersions, APIVersion: 0, RequestID: 7}, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 14, 0x03, 0xe8, 0, 0, 0, 0, 0, 7, 0x0a, 1, 'j', 0x12, 1, '1'}
	if !bytes.Equal(got, want) {
		t.Fatalf("request frame\n got % x\nwant % x", got, want)
	}
	frame, err := NewReader(bytes.NewReader(got), 1<<10, "k").ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	h, body, err := ParseRequest(frame)
	if err != nil || h != (RequestHeader{protocol.ApiVersions, 0, 7}) {
		t.Fatalf("ParseRequest = %+v, %v", h, err)
	}
	var back flusspb.ApiVersionsRequest
	if err := proto.Unmarshal(body, &back); err != nil || !proto.Equal(&back, req) {
		t.Fatalf("body %v, %v", &back, err)
	}
}

// Responses: a success and an error carry the request id after the type; a
// server failure carries none (MessageCodec's three encoders).
func TestResponses(t *testing.T) {
	ok, err := AppendResponse(nil, -2, &flusspb.ApiVersionsResponse{ServerType: proto.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 7, 0, 0xff, 0xff, 0xff, 0xfe, 0x10, 2}; !bytes.Equal(ok, want) {
		t.Fatalf("success frame\n got % x\nwant % x", ok, want)
	}
	if parted := append(AppendResponseHeader(nil, -2, 2), 0x10, 2); !bytes.Equal(parted, ok) {
		t.Fatalf("a header for a body sent after it\n got % x\nwant % x", parted, ok)
	}
	stream, _ := AppendError(ok, 9, protocol.TableNotExist, "")
	stream, _ = AppendServerFailure(stream, protocol.CorruptMessage, "bad frame")
	r := NewReader(bytes.NewReader(stream), 1<<10, "k")

	want := []struct {
		typ  ResponseType
		id   int32
		code protocol.ErrorCode
		msg  string
	}{
		{SuccessResponse, -2, 0, ""},
		{ErrorResponse, 9, protocol.TableNotExist, "The table does not exist."},
		{ServerFailure, 0, protocol.CorruptMessage, "bad frame"},
	}
	for i, w := range want {
		frame, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		resp, err := ParseResponse(frame)
		if err != nil || resp.Type != w.typ || resp.RequestID != w.id {
			t.Fatalf("frame %d: %+v, %v; want type %d id %d", i, resp, err, w.typ, w.id)
		}
		if w.typ == SuccessResponse {
			continue
		}
		e, err := DecodeError(resp.Body)
		if err != nil || protocol.ErrorCode(e.GetErrorCode()) != w.code || e.GetErrorMessage() != w.msg {
			t.Fatalf("frame %d: error %v, %v; want %s %q", i, e, err, w.code, w.msg)
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// Bad frames get errors naming the problem (and the limit's config key),
// never a panic or an allocation of the claimed length.
func TestBadFrames(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    []byte
		isErr error
		text  string
	}{
		{"too large", []byte{0, 0, 0x10, 1}, ErrFrameTooLarge, "4097 bytes, over the limit of 4096 bytes (fluss.max-request-size)"},
		{"huge", []byte{0x7f, 0xff, 0xff, 0xff}, ErrFrameTooLarge, "2147483647 bytes"},
		{"negative", []byte{0xff, 0xff, 0xff, 0xff}, ErrMalformed, "negative length -1"},
		{"truncated length", []byte{0, 0}, io.ErrUnexpectedEOF, ""},
		{"truncated body", []byte{0, 0, 0, 9, 1, 2}, io.ErrUnexpectedEOF, ""},
	} {
		_, err := NewReader(bytes.NewReader(c.in), 4096, "fluss.max-request-size").ReadFrame()
		if !errors.Is(err, c.isErr) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v, want %v containing %q", c.name, err, c.isErr, c.text)
		}
	}
	if _, _, err := ParseRequest([]byte{0x03, 0xe8, 0, 0, 0, 0, 0}); !errors.Is(err, ErrMalformed) {
		t.Errorf("7-byte request: %v", err)
	}
	for _, f := range [][]byte{{}, {0, 0, 0, 0}, {1}, {3, 0, 0, 0, 0}} {
		if _, err := ParseResponse(f); !errors.Is(err, ErrMalformed) {
			t.Errorf("response % x: %v, want ErrMalformed", f, err)
		}
	}
	if _, err := DecodeError([]byte{0x12, 1, 'x'}); !errors.Is(err, ErrMalformed) {
		t.Errorf("ErrorResponse without its required error_code: %v, want ErrMalformed", err)
	}
}
