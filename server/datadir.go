package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// identityFile names the file in the data directory that records which
// cluster and node the directory belongs to (Kafka's meta.properties).
const identityFile = "node.json"

// ErrIdentityMismatch: the data directory belongs to another node or cluster.
var ErrIdentityMismatch = errors.New("server: data directory belongs to another node or cluster")

type identity struct {
	Version   int    `json:"version"`
	ClusterID string `json:"cluster_id"`
	NodeID    int32  `json:"node_id"`
	// fresh: nothing is recorded yet. ClusterID is then only a candidate,
	// the id the cluster gets if this node's coordinator creates it; the
	// node records the metadata group's id once it has joined it
	// (saveIdentity).
	fresh bool
}

// loadIdentity returns the identity recorded in dir. A directory with none
// gets a fresh identity (a new candidate cluster id, or clusterID when
// set), recorded only once the node has joined a cluster. It refuses a
// directory recorded for another node id, or another cluster id when
// clusterID is set.
func loadIdentity(dir string, nodeID int32, clusterID string) (identity, error) {
	path := filepath.Join(dir, identityFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		id := identity{Version: 1, ClusterID: clusterID, NodeID: nodeID, fresh: true}
		if id.ClusterID == "" {
			id.ClusterID = newClusterID()
		}
		return id, nil
	}
	if err != nil {
		return identity{}, fmt.Errorf("read %s: %w", path, err)
	}
	var id identity
	if err := json.Unmarshal(data, &id); err != nil || id.ClusterID == "" {
		return identity{}, fmt.Errorf("%s is damaged (%v); restore it or start with an empty data directory", path, err)
	}
	if id.NodeID != nodeID {
		return id, fmt.Errorf("%w: %s belongs to node %d, but node.id is %d; start with --node-id %d or use another --data-dir",
			ErrIdentityMismatch, dir, id.NodeID, nodeID, id.NodeID)
	}
	if clusterID != "" && id.ClusterID != clusterID {
		return id, fmt.Errorf("%w: %s belongs to cluster %s, but cluster.id is %s",
			ErrIdentityMismatch, dir, id.ClusterID, clusterID)
	}
	return id, nil
}

// saveIdentity records id in dir (node.json).
func saveIdentity(dir string, id identity) error {
	return writeFileAtomic(filepath.Join(dir, identityFile), mustJSON(id), 0o644)
}

// secretFile names the file in the data directory that holds the cluster
// secret of a node given none (cluster.secret): base64 text, mode 0600.
const secretFile = "cluster.secret"

// clusterSecretBytes is the length of a cluster secret: an HMAC-SHA256 key,
// and an AES-256 key for memberlist's gossip encryption.
const clusterSecretBytes = 32

// decodeClusterSecret decodes a cluster secret (base64 of 32 bytes). Its
// errors never quote the secret.
func decodeClusterSecret(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("not base64: want the base64 of %d random bytes, e.g. from `openssl rand -base64 %d`", clusterSecretBytes, clusterSecretBytes)
	}
	if len(b) != clusterSecretBytes {
		return nil, fmt.Errorf("decodes to %d bytes: want the base64 of %d random bytes, e.g. from `openssl rand -base64 %d`", len(b), clusterSecretBytes, clusterSecretBytes)
	}
	return b, nil
}

// loadClusterSecret returns the cluster secret: configured (cluster.secret)
// when set, else the one recorded in dir, which it generates there on first
// start.
func loadClusterSecret(dir, configured string) ([]byte, error) {
	if configured != "" {
		b, err := decodeClusterSecret(configured)
		if err != nil {
			return nil, fmt.Errorf("cluster.secret: %w", err)
		}
		return b, nil
	}
	path := filepath.Join(dir, secretFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b := make([]byte, clusterSecretBytes)
		_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
		return b, writeFileAtomic(path, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	b, err := decodeClusterSecret(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s is damaged (%v); restore it, or set cluster.secret to the cluster's secret", path, err)
	}
	return b, nil
}

func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

// writeFileAtomic writes data to path, with permissions perm, through a
// synced temporary file and a rename, so a crash leaves the old file or the
// new one, never a torn one.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	// A temporary file left by a crash may have other permissions.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
