package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/raftmeta"
	"strom/raftmeta/catalog"
	stromv1 "strom/rpc/gen/strom/v1"
)

// forwardedProposal is a forward request proposing one command, encoded by
// hand as raftmeta/forward.go and raftmeta/DESIGN.md describe it: what
// someone with curl would post.
func forwardedProposal(cmdType byte, session int64, op []byte) []byte {
	b := []byte{1, cmdType}                 // propose, command type
	b = binary.BigEndian.AppendUint64(b, 0) // nonce
	b = binary.BigEndian.AppendUint64(b, 0) // time
	b = binary.BigEndian.AppendUint64(b, uint64(session))
	return append(b, op...)
}

// createOp encodes a persistent create of path with no data and no ACL.
func createOp(path string) []byte {
	b := []byte{1} // create
	b = binary.BigEndian.AppendUint32(b, uint32(len(path)))
	b = append(b, path...)
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)    // nil data
	b = append(b, 0)                                    // persistent
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)    // version -1
	b = binary.BigEndian.AppendUint64(b, 0)             // ttl
	return binary.BigEndian.AppendUint32(b, 0xffffffff) // nil ACL
}

func postForward(t *testing.T, s *Server, body []byte, sign func(*http.Request)) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+s.Addr()+raftmeta.ForwardPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	sign(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestForwardCallsNeedTheClusterSecret: the node-to-node forwarding path is
// on the API port, but a call without the cluster secret's signature can
// neither write metadata nor close the node's session.
func TestForwardCallsNeedTheClusterSecret(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, testConfig(t, dir))
	session := s.session.Load()
	bodies := map[string][]byte{
		"create /strom/pwned": forwardedProposal(5, 0, createOp("/strom/pwned")),
		"create /pwned":       forwardedProposal(5, 0, createOp("/pwned")),
		"close the session":   forwardedProposal(3, session, nil),
	}
	wrongSecret := bytes.Repeat([]byte{7}, 32)
	for what, body := range bodies {
		if status, out := postForward(t, s, body, func(*http.Request) {}); status != http.StatusUnauthorized {
			t.Errorf("unsigned %s: status %d (%q), want 401", what, status, out)
		}
		status, out := postForward(t, s, body, func(r *http.Request) { raftmeta.SignForward(r, wrongSecret, "1", body, time.Now()) })
		if status != http.StatusForbidden {
			t.Errorf("%s signed with another secret: status %d (%q), want 403", what, status, out)
		}
	}
	for _, p := range []string{"/strom/pwned", "/pwned"} {
		if _, err := s.meta.Exists(p); !errors.Is(err, raftmeta.ErrNoNode) {
			t.Errorf("%s after refused calls: %v", p, err)
		}
	}
	if owner, err := s.cat.TabletServerOwner(s.cfg.NodeID); err != nil || owner != session {
		t.Fatalf("registration owned by %#x (%v), want the node's session %#x", owner, err, session)
	}
	c := adminClient(s)
	mustCreateDB(t, c, "db")
	mustCreateLogTable(t, c, "db", "t")

	// Signed with the cluster secret, a call is served; an unfenced write
	// under /strom is still refused, by the metadata's write rule.
	secret, err := loadClusterSecret(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	body := bodies["create /strom/pwned"]
	status, out := postForward(t, s, body, func(r *http.Request) { raftmeta.SignForward(r, secret, "1", body, time.Now()) })
	if status != http.StatusOK || !bytes.Contains(out, []byte("not fenced by the coordinator epoch")) {
		t.Fatalf("signed create /strom/pwned: status %d, reply %q; want a refusal", status, out)
	}
	if _, err := s.meta.Exists("/strom/pwned"); !errors.Is(err, raftmeta.ErrNoNode) {
		t.Errorf("/strom/pwned after the signed call: %v", err)
	}
}

// TestUnfencedStromWritesAreRefused: under /strom only the coordinator's
// epoch-fenced multis and a node's own registration are written.
func TestUnfencedStromWritesAreRefused(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := t.Context()
	before := s.meta.LastZxid()
	for name, write := range map[string]func() error{
		"create": func() error { _, err := s.meta.Create(ctx, "/strom/pwned", nil, raftmeta.Persistent); return err },
		"delete the registration": func() error {
			return s.meta.Delete(ctx, catalog.TabletServerPath(s.cfg.NodeID), -1)
		},
		"another node's registration": func() error {
			_, err := s.meta.Do(ctx, s.session.Load(), catalog.RegisterTabletServerOp(s.cfg.NodeID+1, catalog.TabletServerRegistration{}))
			return err
		},
	} {
		err := write()
		if !errors.Is(err, raftmeta.ErrRefused) || !errors.Is(err, catalog.ErrUnfencedWrite) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	if after := s.meta.LastZxid(); after != before {
		t.Errorf("zxid moved from %d to %d: a refused write was proposed", before, after)
	}
	if _, err := s.meta.Create(ctx, "/elsewhere", nil, raftmeta.Persistent); err != nil {
		t.Errorf("write outside /strom: %v", err)
	}
}

// TestNodeRegistersAgain: a node whose registration disappears (session
// closed, or the znode deleted) registers again, and tables can be created
// again.
func TestNodeRegistersAgain(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	ctx := t.Context()
	c := adminClient(s)
	mustCreateDB(t, c, "db")
	waitRegistered := func(what string, notOwner int64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			owner, err := s.cat.TabletServerOwner(s.cfg.NodeID)
			if err == nil && owner != 0 && owner != notOwner {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not registered again (owner %#x, %v)", what, owner, err)
			}
			time.Sleep(10 * time.Millisecond) // polling
		}
	}

	old := s.session.Load()
	if err := s.meta.CloseSession(ctx, old); err != nil {
		t.Fatal(err)
	}
	waitRegistered("session closed", old)
	mustCreateLogTable(t, c, "db", "after_close")

	// The znode deleted by a fenced write: the session lives on and
	// registers it again.
	_, _, version, err := s.cat.Coordinator()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.meta.Multi(ctx, 0, catalog.EpochCheck(version), raftmeta.DeleteOp(catalog.TabletServerPath(s.cfg.NodeID), -1)); err != nil {
		t.Fatal(err)
	}
	waitRegistered("registration deleted", 0)
	mustCreateLogTable(t, c, "db", "after_delete")
	if _, err := c.ListTables(ctx, connect.NewRequest(&stromv1.ListTablesRequest{Database: "db"})); err != nil {
		t.Fatal(err)
	}
}

func TestClusterSecret(t *testing.T) {
	dir := t.TempDir()
	first, err := loadClusterSecret(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, secretFile))
	if err != nil || fi.Mode().Perm() != 0o600 || len(first) != 32 {
		t.Fatalf("generated secret: %d bytes, file %v %v; want 32 bytes in a 0600 file", len(first), fi, err)
	}
	again, err := loadClusterSecret(dir, "")
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("restart: secret changed (%v)", err)
	}
	given := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	if got, err := loadClusterSecret(dir, given); err != nil || bytes.Equal(got, first) {
		t.Fatalf("cluster.secret given: %v; want it over the generated one", err)
	}
	if err := os.WriteFile(filepath.Join(dir, secretFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadClusterSecret(dir, ""); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("damaged secret file: %v", err)
	}

	for _, bad := range []string{"not base64!", base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))} {
		cfg := DefaultConfig()
		cfg.ClusterSecret = bad
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "cluster.secret") || !strings.Contains(err.Error(), "32") || strings.Contains(err.Error(), bad) {
			t.Errorf("cluster.secret %q: %v; want an error naming the key and the length, not the value", bad, err)
		}
	}
	cfg := DefaultConfig()
	cfg.ClusterSecret = given
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestGivenClusterSecretIsUsed: a node started with a given cluster.secret
// signs with it, not with its data directory's.
func TestGivenClusterSecretIsUsed(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	given := bytes.Repeat([]byte{3}, 32)
	cfg.ClusterSecret = base64.StdEncoding.EncodeToString(given)
	s := startServer(t, cfg)
	body := forwardedProposal(5, 0, createOp("/given"))
	if status, out := postForward(t, s, body, func(r *http.Request) { raftmeta.SignForward(r, given, "1", body, time.Now()) }); status != http.StatusOK {
		t.Fatalf("call signed with the given secret: status %d (%q)", status, out)
	}
	if _, err := s.meta.Exists("/given"); err != nil {
		t.Fatal(err)
	}
}
