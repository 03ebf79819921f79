package raftmeta

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Forward calls are authenticated with the cluster secret
// (Config.ForwardSecret). The sender puts its NodeID, its clock and an
// HMAC-SHA256 of the call in three headers:
//
//	Raftmeta-From: NodeID    Raftmeta-Time: unix ms    Raftmeta-Mac: base64(mac)
//	mac := HMAC-SHA256(secret, "raftmeta-forward-v1" str | method str |
//	                           path str | from str | time i64 | body)
//
// (str and i64 as in codec.go, so the fields cannot run into each other).
// The receiver refuses a call without them (401) before reading its body,
// one stamped more than maxForwardSkew away from its own clock (403; this
// bounds how long a captured call can be replayed), and one whose MAC,
// compared with hmac.Equal before anything is decoded, does not match
// (403).

const (
	headerForwardFrom = "Raftmeta-From"
	headerForwardTime = "Raftmeta-Time"
	headerForwardMAC  = "Raftmeta-Mac"
)

// MinForwardSecret is the least length of Config.ForwardSecret in bytes.
const MinForwardSecret = 32

// maxForwardSkew is how far a forward call's time may be from the
// receiver's clock: well above the clock skew of a cluster kept by NTP.
const maxForwardSkew = 30 * time.Second

func forwardMAC(secret []byte, method, path, from string, ms int64, body []byte) []byte {
	e := &encoder{}
	e.str("raftmeta-forward-v1")
	e.str(method)
	e.str(path)
	e.str(from)
	e.i64(ms)
	m := hmac.New(sha256.New, secret)
	m.Write(e.b)
	m.Write(body)
	return m.Sum(nil)
}

// SignForward signs a forward call r (its method and URL path) carrying
// body, sent by node from at now, with secret. Nodes sign their own calls;
// it is exported for tests and tools that speak to ForwardHandler.
func SignForward(r *http.Request, secret []byte, from string, body []byte, now time.Time) {
	ms := now.UnixMilli()
	r.Header.Set(headerForwardFrom, from)
	r.Header.Set(headerForwardTime, strconv.FormatInt(ms, 10))
	r.Header.Set(headerForwardMAC, base64.StdEncoding.EncodeToString(forwardMAC(secret, r.Method, r.URL.Path, from, ms, body)))
}

// ReadSigned reads the body of a node-to-node call r signed as SignForward
// signs (a forward call, or any other call between nodes) and checks the
// signature with secret: the header first, so an unsigned call is refused
// unread. It returns the sender's node id and the body (at most maxBody
// bytes: a longer one does not match its signature), or the HTTP status of
// the refusal (401 unsigned, 403 stale or wrongly signed, 400 unreadable)
// and the error.
func ReadSigned(r *http.Request, secret []byte, maxBody int64, now time.Time) (from string, body []byte, status int, err error) {
	if status, err := checkForwardHeader(r, now); err != nil {
		return "", nil, status, err
	}
	body, err = io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return "", nil, http.StatusBadRequest, err
	}
	if err := verifyForward(r, secret, body); err != nil {
		return "", nil, http.StatusForbidden, err
	}
	return r.Header.Get(headerForwardFrom), body, 0, nil
}

// checkForwardHeader checks what can be checked of a forward call before
// its body is read: that it is signed and fresh. It returns the HTTP status
// of the refusal with the error.
func checkForwardHeader(r *http.Request, now time.Time) (int, error) {
	if r.Header.Get(headerForwardMAC) == "" || r.Header.Get(headerForwardFrom) == "" {
		return http.StatusUnauthorized, errors.New("raftmeta: forward call not signed: node-to-node calls need the cluster secret")
	}
	ms, err := strconv.ParseInt(r.Header.Get(headerForwardTime), 10, 64)
	if err != nil {
		return http.StatusForbidden, fmt.Errorf("raftmeta: forward call: bad %s header", headerForwardTime)
	}
	if skew := now.Sub(time.UnixMilli(ms)).Abs(); skew > maxForwardSkew {
		return http.StatusForbidden, fmt.Errorf("raftmeta: forward call stamped %s away from this node's clock, more than %s: replayed, or the nodes' clocks disagree",
			skew.Round(time.Millisecond), maxForwardSkew)
	}
	return 0, nil
}

// verifyForward checks the MAC of a forward call whose header
// checkForwardHeader accepted.
func verifyForward(r *http.Request, secret, body []byte) error {
	if len(secret) == 0 {
		return errors.New("raftmeta: this node has no forward secret and accepts no forward calls")
	}
	got, err := base64.StdEncoding.DecodeString(r.Header.Get(headerForwardMAC))
	ms, _ := strconv.ParseInt(r.Header.Get(headerForwardTime), 10, 64) // checked by checkForwardHeader
	want := forwardMAC(secret, r.Method, r.URL.Path, r.Header.Get(headerForwardFrom), ms, body)
	if err != nil || !hmac.Equal(got, want) {
		return errors.New("raftmeta: forward call signature does not match: the nodes do not share the cluster secret")
	}
	return nil
}
