package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
}

// loadIdentity returns the identity recorded in dir, creating it (with a new
// cluster id unless clusterID is set) on first start. It refuses a directory
// recorded for another node id, or another cluster id when clusterID is set.
func loadIdentity(dir string, nodeID int32, clusterID string) (identity, error) {
	path := filepath.Join(dir, identityFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		id := identity{Version: 1, ClusterID: clusterID, NodeID: nodeID}
		if id.ClusterID == "" {
			id.ClusterID = newClusterID()
		}
		return id, writeFileAtomic(path, mustJSON(id))
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

// writeFileAtomic writes data to path through a synced temporary file and a
// rename, so a crash leaves the old file or the new one, never a torn one.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
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
