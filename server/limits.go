package server

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"strom/rpc"
)

// limitRequests applies the per-request limits of the API port before next
// sees a request: a body whose declared length (Content-Length, or the Go
// client's Strom-Body-Length) is over netty.server.max-request-size is
// refused with a Connect error naming the key, unread; and every body gets
// a progress deadline of api.read-timeout (progressBody). Bodies of
// undeclared length (gRPC) are bounded per message by connect-go's read
// limit, set to the same size.
func limitRequests(next http.Handler, maxBody int64, readTimeout time.Duration) http.Handler {
	errs := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := declaredLength(r); n > maxBody {
			_ = errs.Write(w, r, rpc.Error(fmt.Errorf("%w: request body of %d bytes is over netty.server.max-request-size (%d bytes); send smaller requests or raise the key",
				rpc.ErrLimitExceeded, n, maxBody)))
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &progressBody{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: readTimeout}
		}
		next.ServeHTTP(w, r)
	})
}

// declaredLength is a request body's length as its headers give it, -1 when
// they do not.
func declaredLength(r *http.Request) int64 {
	if r.ContentLength >= 0 {
		return r.ContentLength
	}
	n, err := strconv.ParseInt(r.Header.Get(bodyLengthHeader), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// progressBody is a request body that must keep arriving: a read that
// waits longer than timeout for its next bytes fails (the client is gone or
// stalled) and the handler's read ends with an error. Slow but live uploads
// are read to their end, and once the body is read the deadline is lifted,
// so a long-poll fetch waits as long as it asks. The deadline is re-armed
// at most every timeout/2 (each arming is a message to the connection's
// goroutine over HTTP/2), so a read may wait between timeout/2 and
// timeout. After a timeout the deadline stays passed, so that net/http,
// discarding the rest of the body, does not wait for it either. Not safe
// for concurrent reads, as no request body is.
type progressBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	armed   time.Time // when the deadline was last set; zero when lifted
}

func (b *progressBody) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(b.armed) > b.timeout/2 {
		_ = b.rc.SetReadDeadline(now.Add(b.timeout))
		b.armed = now
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		_ = b.rc.SetReadDeadline(time.Time{})
		b.armed = time.Time{}
	}
	return n, err
}
