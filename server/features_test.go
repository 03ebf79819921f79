package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"strom/raftmeta/catalog"
	stromv1 "strom/rpc/gen/strom/v1"
)

// TestFeatureLevelOfOneNode: a node registers this build's feature level and,
// the only member, moves the cluster to it; DescribeCluster says both. Once
// the cluster's level is above this build's (a later build ran here), the
// node refuses to start, naming both levels.
func TestFeatureLevelOfOneNode(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	s := startServer(t, cfg)
	ctx := context.Background()
	var d *stromv1.DescribeClusterResponse
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := adminClient(s).DescribeCluster(ctx, connect.NewRequest(&stromv1.DescribeClusterRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if d = resp.Msg; d.ActiveFeatureLevel == catalog.SupportedFeatureLevel {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("active feature level %d, want %d", d.ActiveFeatureLevel, catalog.SupportedFeatureLevel)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(d.Nodes) != 1 || d.Nodes[0].FeatureLevel != catalog.SupportedFeatureLevel {
		t.Fatalf("nodes %v, want one of feature level %d", d.Nodes, catalog.SupportedFeatureLevel)
	}

	// A later build raised the level (as its coordinator would: fenced).
	_, _, epochVersion, err := s.cat.Coordinator()
	if err != nil {
		t.Fatal(err)
	}
	_, version, err := s.cat.FeatureLevel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.meta.Multi(ctx, 0, catalog.EpochCheck(epochVersion), catalog.SetFeatureLevelOp(catalog.SupportedFeatureLevel+1, version)); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s2, err := Start(sctx, cfg, testLogger(t))
	if err == nil {
		_ = s2.Stop(ctx)
		t.Fatal("a build below the cluster's feature level started")
	}
	if want := fmt.Sprintf("feature level %d", catalog.SupportedFeatureLevel+1); !errors.Is(err, catalog.ErrFeatureLevel) || !strings.Contains(err.Error(), want) {
		t.Fatalf("start below the cluster's level: %v, want ErrFeatureLevel naming %s", err, want)
	}
}
