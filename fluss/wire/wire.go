// Package wire is the framing of Apache Fluss's protocol (fluss/DESIGN.md),
// checked against Fluss 0.9.1's MessageCodec and NettyServerHandler:
//
//	request:        int32 length | int16 api key | int16 api version | int32 request id | body
//	response:       int32 length | int8 type (0 success, 1 error) | int32 request id | body
//	server failure: int32 length | int8 type (2)                                     | body
//
// All integers are big-endian; length counts the bytes after itself. A body
// is one protobuf message of FlussApi.proto (fluss/gen/flusspb); an error or
// server-failure body is an ErrorResponse. A server failure carries no
// request id: Fluss sends it when the connection is broken and then closes it.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
)

// Header lengths, as in Fluss's MessageCodec (the length field not counted).
const (
	RequestHeaderLen       = 8 // api key, api version, request id
	ResponseHeaderLen      = 5 // type, request id
	ServerFailureHeaderLen = 1 // type
)

// ResponseType is the int8 that starts a response frame.
type ResponseType int8

// Fluss's ResponseType values.
const (
	SuccessResponse ResponseType = 0
	ErrorResponse   ResponseType = 1
	ServerFailure   ResponseType = 2
)

var (
	// ErrFrameTooLarge reports a frame longer than the reader's limit.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrMalformed reports a frame that is not a valid request or response:
	// a negative length, a frame shorter than its header, an unknown
	// response type, or a body that does not decode.
	ErrMalformed = errors.New("wire: malformed frame")
)

// RequestHeader is the header of a request frame.
type RequestHeader struct {
	APIKey     protocol.APIKey
	APIVersion int16
	RequestID  int32
}

// Reader reads length-prefixed frames from a stream, refusing any frame
// longer than a limit before allocating for it. It is not safe for
// concurrent use.
type Reader struct {
	r        io.Reader
	max      int
	limitKey string
	hdr      [4]byte
}

// NewReader returns a Reader of r that refuses frames longer than maxFrame
// bytes (the length field not counted). limitKey names the config key that
// sets maxFrame, for the error (e.g. "fluss.max-request-size").
func NewReader(r io.Reader, maxFrame int, limitKey string) *Reader {
	return &Reader{r: r, max: maxFrame, limitKey: limitKey}
}

// ReadFrame reads the next frame and returns its bytes after the length
// field, in a new slice the caller owns. It returns io.EOF at a clean end of
// the stream, io.ErrUnexpectedEOF when the stream ends inside a frame, and an
// error wrapping ErrFrameTooLarge or ErrMalformed for a bad length, after
// which the stream is out of step and must be closed.
func (r *Reader) ReadFrame() ([]byte, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(r.hdr[:]))
	switch {
	case n < 0:
		return nil, fmt.Errorf("%w: negative length %d", ErrMalformed, n)
	case int64(n) > int64(r.max):
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d bytes (%s)", ErrFrameTooLarge, n, r.max, r.limitKey)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r.r, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

// ParseRequest splits a request frame (as ReadFrame returns it) into its
// header and body; the body aliases frame.
func ParseRequest(frame []byte) (RequestHeader, []byte, error) {
	if len(frame) < RequestHeaderLen {
		return RequestHeader{}, nil, fmt.Errorf("%w: request of %d bytes, shorter than its %d-byte header", ErrMalformed, len(frame), RequestHeaderLen)
	}
	h := RequestHeader{
		APIKey:     protocol.APIKey(binary.BigEndian.Uint16(frame[0:])),
		APIVersion: int16(binary.BigEndian.Uint16(frame[2:])),
		RequestID:  int32(binary.BigEndian.Uint32(frame[4:])),
	}
	return h, frame[RequestHeaderLen:], nil
}

// Response is a parsed response frame. RequestID is 0 for a ServerFailure,
// which carries none.
type Response struct {
	Type      ResponseType
	RequestID int32
	Body      []byte // aliases the frame
}

// ParseResponse splits a response frame (as ReadFrame returns it) into its
// type, request id and body.
func ParseResponse(frame []byte) (Response, error) {
	if len(frame) < ServerFailureHeaderLen {
		return Response{}, fmt.Errorf("%w: empty response frame", ErrMalformed)
	}
	t := ResponseType(frame[0])
	switch t {
	case ServerFailure:
		return Response{Type: t, Body: frame[ServerFailureHeaderLen:]}, nil
	case SuccessResponse, ErrorResponse:
		if len(frame) < ResponseHeaderLen {
			return Response{}, fmt.Errorf("%w: response of %d bytes, shorter than its %d-byte header", ErrMalformed, len(frame), ResponseHeaderLen)
		}
		return Response{Type: t, RequestID: int32(binary.BigEndian.Uint32(frame[1:])), Body: frame[ResponseHeaderLen:]}, nil
	default:
		return Response{}, fmt.Errorf("%w: response type %d, want 0, 1 or 2", ErrMalformed, t)
	}
}

// DecodeError decodes the body of an error or server-failure response.
func DecodeError(body []byte) (*flusspb.ErrorResponse, error) {
	e := new(flusspb.ErrorResponse)
	if err := proto.Unmarshal(body, e); err != nil {
		return nil, fmt.Errorf("%w: ErrorResponse: %v", ErrMalformed, err)
	}
	return e, nil
}

// AppendRequest appends the request frame of h and msg to dst.
func AppendRequest(dst []byte, h RequestHeader, msg proto.Message) ([]byte, error) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.APIKey))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.APIVersion))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.RequestID))
	return appendBody(dst, start, msg)
}

// AppendResponse appends the success response frame of requestID and msg to dst.
func AppendResponse(dst []byte, requestID int32, msg proto.Message) ([]byte, error) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = append(dst, byte(SuccessResponse))
	dst = binary.BigEndian.AppendUint32(dst, uint32(requestID))
	return appendBody(dst, start, msg)
}

// AppendResponseHeader appends the header of a success response frame of
// requestID whose body, bodyLen bytes of one message as proto.Marshal would
// encode it, the caller sends right after it: a body written in parts from
// where they are (FETCH_LOG's records, from the buffers they were read
// into) rather than copied into one frame.
func AppendResponseHeader(dst []byte, requestID int32, bodyLen int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(ResponseHeaderLen+bodyLen))
	dst = append(dst, byte(SuccessResponse))
	return binary.BigEndian.AppendUint32(dst, uint32(requestID))
}

// AppendError appends the error response frame of requestID to dst: an
// ErrorResponse with code and message (code's Fluss default message when
// message is empty).
func AppendError(dst []byte, requestID int32, code protocol.ErrorCode, message string) ([]byte, error) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = append(dst, byte(ErrorResponse))
	dst = binary.BigEndian.AppendUint32(dst, uint32(requestID))
	return appendBody(dst, start, errorBody(code, message))
}

// AppendServerFailure appends a server-failure frame to dst, which has no
// request id; the sender closes the connection after it.
func AppendServerFailure(dst []byte, code protocol.ErrorCode, message string) ([]byte, error) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = append(dst, byte(ServerFailure))
	return appendBody(dst, start, errorBody(code, message))
}

func errorBody(code protocol.ErrorCode, message string) *flusspb.ErrorResponse {
	if message == "" {
		message = code.DefaultMessage()
	}
	return &flusspb.ErrorResponse{ErrorCode: proto.Int32(int32(code)), ErrorMessage: proto.String(message)}
}

// appendBody marshals msg after the header begun at dst[start:] and fills in
// the frame's length.
func appendBody(dst []byte, start int, msg proto.Message) ([]byte, error) {
	dst, err := proto.MarshalOptions{}.MarshalAppend(dst, msg)
	if err != nil {
		return dst[:start], fmt.Errorf("wire: marshal %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, nil
}
