package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"strom/raftmeta"
	"strom/raftmeta/membership"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = ""
	cfg.Listen = "nonsense"
	cfg.DefaultBucketNumber = 0
	cfg.LogFormat = "xml"
	cfg.SessionTimeout = time.Millisecond
	cfg.MaxConnectionsPerIP = 0
	cfg.MaxRequestBytes = 4 << 30
	cfg.ReadTimeout = 0
	cfg.ReplicaMaxLagTime = cfg.ReplicaFetchWaitMaxTime
	cfg.MinInSyncReplicas = 0
	err := cfg.Validate()
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"data.dir (--data-dir)", "api.listen (--listen)", "default.bucket.number", "log.format (--log-format)", "session.timeout",
		"max.connections.per.ip", "netty.server.max-request-size", "api.read-timeout",
		"log.replica.max-lag-time: must be longer than log.replica.fetch.wait-max-time", "log.replica.min-in-sync-replicas-number"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestConfigSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "strom.yaml")
	if err := os.WriteFile(file, []byte("data.dir: /from/file\ndefault.bucket.number: 8\nlog.format: json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if err := cfg.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"STROM_DEFAULT_BUCKET_NUMBER": "16", "STROM_NODE_ID": "7"}
	if err := cfg.LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/file" || cfg.DefaultBucketNumber != 16 || cfg.NodeID != 7 || cfg.LogFormat != "json" {
		t.Fatalf("config = %+v", cfg)
	}
}

func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "strom.yaml")
	if err := os.WriteFile(file, []byte("data.dirr: x\nnode.id: one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	err := cfg.LoadFile(file)
	if err == nil || !strings.Contains(err.Error(), `unknown key "data.dirr"`) || !strings.Contains(err.Error(), "node.id") {
		t.Fatalf("err = %v, want both problems named", err)
	}
	if err := cfg.LoadFile(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("missing file: want an error")
	}
	env := map[string]string{"STROM_SESSION_TIMEOUT": "soon"}
	err = cfg.LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil || !strings.Contains(err.Error(), "STROM_SESSION_TIMEOUT") {
		t.Fatalf("bad env: %v", err)
	}
}

func TestAdvertised(t *testing.T) {
	for _, tc := range []struct{ addr, override, want string }{
		{":9123", "", "127.0.0.1:9123"},
		{"0.0.0.0:9123", "", "127.0.0.1:9123"},
		{"[::]:9123", "", "127.0.0.1:9123"},
		{"10.1.2.3:9123", "", "10.1.2.3:9123"},
		{":9123", "node1:9123", "node1:9123"},
	} {
		if got := advertised(tc.addr, tc.override); got != tc.want {
			t.Errorf("advertised(%q, %q) = %q, want %q", tc.addr, tc.override, got, tc.want)
		}
	}
}

// The example configuration shipped in config/ loads and is valid.
func TestExampleConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.LoadFile("../config/strom.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.ZooKeeperListen != "127.0.0.1:2181" || cfg.SegmentBytes != 1<<30 {
		t.Fatalf("example config read as %+v", cfg)
	}
}

// The flush keys default to never (Kafka's Long.MAX_VALUE), are read from
// the environment like every key, and refuse values below 1 naming the key.
func TestFlushKeys(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.flushInterval() != 0 || cfg.FlushIntervalMessages != 1<<63-1 {
		t.Fatalf("defaults: interval %s, messages %d; want never", cfg.flushInterval(), cfg.FlushIntervalMessages)
	}
	env := map[string]string{"STROM_LOG_FLUSH_INTERVAL_MESSAGES": "1", "STROM_LOG_FLUSH_INTERVAL_MS": "250"}
	if err := cfg.LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if cfg.FlushIntervalMessages != 1 || cfg.flushInterval() != 250*time.Millisecond {
		t.Fatalf("from the environment: messages %d, interval %s", cfg.FlushIntervalMessages, cfg.flushInterval())
	}
	// A count above 1 alone would never flush a quiet bucket's tail.
	alone := DefaultConfig()
	alone.FlushIntervalMessages = 100
	if err := alone.Validate(); err == nil || !strings.Contains(err.Error(), "log.flush.interval-ms") {
		t.Errorf("interval-messages 100 without interval-ms: error %v, want one naming log.flush.interval-ms", err)
	}
	alone.FlushIntervalMs = 1000
	if err := alone.Validate(); err != nil {
		t.Errorf("interval-messages 100 with interval-ms 1000: %v", err)
	}
	cfg.FlushIntervalMessages, cfg.FlushIntervalMs = 0, -1
	err := cfg.Validate()
	for _, want := range []string{"log.flush.interval-messages", "log.flush.interval-ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}

func TestClusterKeys(t *testing.T) {
	cfg := DefaultConfig()
	env := map[string]string{
		"STROM_CLUSTER_JOIN":             " 127.0.0.1:9125, ,127.0.0.1:9135 ",
		"STROM_CLUSTER_BOOTSTRAP_EXPECT": "3",
		"STROM_GOSSIP_LISTEN":            "127.0.0.1:9145",
		"STROM_NODE_RACK":                "r1",
	}
	if err := cfg.LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Join, "|") != "127.0.0.1:9125|127.0.0.1:9135" || cfg.BootstrapExpect != 3 || cfg.GossipListen != "127.0.0.1:9145" || cfg.Rack != "r1" {
		t.Fatalf("config = %+v", cfg)
	}
	k, _ := keyByName("cluster.join")
	if got := k.Get(&cfg); got != "127.0.0.1:9125,127.0.0.1:9135" {
		t.Fatalf("cluster.join = %q", got)
	}
	// Clustering without a shared secret cannot work: each node would
	// generate its own.
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "cluster.secret") || !strings.Contains(err.Error(), "openssl rand -base64 32") {
		t.Fatalf("err = %v, want cluster.secret required with how to make one", err)
	}
	cfg.ClusterSecret = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}

	bad := DefaultConfig()
	bad.BootstrapExpect = 0
	bad.RaftVoters = 0
	bad.Join = []string{"nohost"}
	bad.GossipListen = bad.RaftListen
	bad.DeadNodeCleanup = time.Second
	bad.ServerStabilizationTime = 0
	err = bad.Validate()
	for _, want := range []string{"cluster.bootstrap-expect (--bootstrap-expect)", "raft.voters", "cluster.join (--join)", "gossip.listen (--gossip-listen)",
		"cluster.dead-node-cleanup", "cluster.server-stabilization-time", "cluster.secret"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}

// zookeeper.jute.maxbuffer is bounded by what a follower can forward to the
// metadata leader: a larger packet would be accepted on the leader and fail
// on every follower.
func TestZooKeeperMaxPacketBoundedByForwarding(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ZooKeeperMaxPacket = 100 << 20 // Fluss's zookeeper.client.max-buffer-size
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "zookeeper.jute.maxbuffer") {
		t.Fatalf("Validate = %v, want an error naming zookeeper.jute.maxbuffer", err)
	}
	cfg.ZooKeeperMaxPacket = raftmeta.MaxForwardBytes / 2
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the largest allowed value is refused: %v", err)
	}
}

// The gossip's failure detection is configurable by Consul's gossip_lan
// names, defaults probing every 500ms (membership.DefaultTimings), and a
// probe timeout must stay below the interval.
func TestGossipKeys(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.GossipTimings != membership.DefaultTimings() {
		t.Fatalf("default gossip timings %+v, want %+v", cfg.GossipTimings, membership.DefaultTimings())
	}
	env := map[string]string{
		"STROM_GOSSIP_PROBE_INTERVAL": "2s",
		"STROM_GOSSIP_PROBE_TIMEOUT":  "1s",
		"STROM_GOSSIP_SUSPICION_MULT": "6",
	}
	if err := cfg.LoadEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if g := cfg.GossipTimings; g.ProbeInterval != 2*time.Second || g.ProbeTimeout != time.Second || g.SuspicionMult != 6 {
		t.Fatalf("gossip timings = %+v", g)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.GossipTimings.ProbeTimeout = cfg.GossipTimings.ProbeInterval
	cfg.GossipTimings.SuspicionMult = 0
	err := cfg.Validate()
	for _, want := range []string{"gossip.probe-timeout: must be positive and below gossip.probe-interval", "gossip.suspicion-mult: must be ≥ 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}
