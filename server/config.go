package server

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.yaml.in/yaml/v3"

	"strom/fluss/paimon"
	"strom/raftmeta"
	"strom/raftmeta/membership"
	"strom/record"
	"strom/remote"
)

// Config is one node's configuration. Keys use Fluss's names where Fluss
// has one. Values come from DefaultConfig, then a YAML file, then STROM_*
// environment variables, then command-line flags, each overriding the last.
type Config struct {
	// NodeID identifies the node in the cluster (node.id, --node-id). It is
	// recorded in the data directory on first start; later starts must agree.
	NodeID int32
	// DataDir holds the node's metadata replica and tablets (data.dir, --data-dir).
	DataDir string
	// Listen is the API address: Connect, gRPC, gRPC-Web, HTTP JSON, health
	// (api.listen, --listen).
	Listen string
	// Advertise is the API address other nodes and clients are told to use
	// (api.advertise); defaults to Listen with an unspecified host replaced by
	// 127.0.0.1.
	Advertise string
	// RaftListen is the Raft transport's TCP address (raft.listen, --raft-listen).
	RaftListen string
	// RaftAdvertise is the Raft address other nodes dial (raft.advertise);
	// derived from RaftListen like Advertise.
	RaftAdvertise string
	// SourceIP is the local IP the node's connections to other nodes (Raft,
	// forwarding, node-to-node calls) are made from (node.source-ip; empty:
	// the OS's choice). A test harness gives each node its own loopback IP
	// so that a proxy between the nodes can tell them apart.
	SourceIP string
	// ClusterID, when set, must match the cluster the data directory belongs
	// to (cluster.id). Empty accepts any.
	ClusterID string
	// GossipListen is the membership (memberlist gossip) address, TCP and
	// UDP (gossip.listen, --gossip-listen; default ":9125", Consul's
	// serf_lan port role). A node that is not clustering (no cluster.join,
	// cluster.bootstrap-expect 1) still listens here so that others can
	// join it later, but a port already in use only logs a warning then.
	GossipListen string
	// GossipAdvertise is the gossip address other nodes are told to use
	// (gossip.advertise, --gossip-advertise); derived from GossipListen
	// like Advertise.
	GossipAdvertise string
	// Join lists gossip addresses (host:port) of nodes of the cluster to
	// join (cluster.join, --join, comma-separated; Consul's retry_join).
	// Any one that answers is enough; the list is retried in the background
	// until one does. Empty: the node starts its own cluster.
	Join []string
	// BootstrapExpect is how many nodes, all without metadata state, must
	// see each other before the metadata group is bootstrapped with all of
	// them as voters (cluster.bootstrap-expect, --bootstrap-expect;
	// Consul's bootstrap_expect; default 1: a node with no cluster.join
	// is a complete single-node cluster). It matters only on a node's
	// first start; a restart never bootstraps again.
	BootstrapExpect int
	// RaftVoters is how many nodes the Raft leader keeps as voters of the
	// metadata group, the rest being non-voters (raft.voters; default 3).
	// An even count is never reached when it would not raise fault
	// tolerance: with 4 eligible nodes and raft.voters 5, 3 vote.
	RaftVoters int
	// Rack is the node's rack or zone, for rack-aware replica placement
	// (node.rack, --rack; Kafka's broker.rack). Empty: none.
	Rack string
	// DeadVoterGrace is how long a voter may be dead (declared failed by
	// gossip) before the Raft leader replaces it with a live non-voter
	// (cluster.dead-voter-grace; default 30s).
	DeadVoterGrace time.Duration
	// ServerStabilizationTime is how long a non-voter must be alive in the
	// metadata group before the leader promotes it to voter
	// (cluster.server-stabilization-time, Consul autopilot's
	// ServerStabilizationTime; default 10s).
	ServerStabilizationTime time.Duration
	// DeadNodeCleanup is how long a node may be dead before the Raft leader
	// removes it from the metadata group (cluster.dead-node-cleanup;
	// Consul's reconnect_timeout, default 72h). A removed node that comes
	// back is added again as a non-voter.
	DeadNodeCleanup time.Duration
	// GossipTimings are the gossip's intervals. Three are keys (Consul's
	// gossip_lan names): ProbeInterval (gossip.probe-interval, default
	// 500ms), ProbeTimeout (gossip.probe-timeout, 250ms, below the
	// interval) and SuspicionMult (gossip.suspicion-mult, 4): with them a
	// killed node is declared dead in about 2.5 s on a small cluster, and
	// its buckets fail over then (membership.DefaultTimings). The others
	// are memberlist's LAN defaults; tests shorten all of them
	// (membership.LocalTimings).
	GossipTimings membership.Timings
	// TabletFS is the file system of the tablets (DataDir/tablets: every
	// replica's log and KV); nil means the operating system's. Not a key:
	// power-loss tests pass an in-memory one (internal/strictfs). The
	// metadata replica (raft-boltdb) and the node's identity files stay on
	// the real disk.
	TabletFS vfs.FS
	// ClusterSecret is the secret every node of the cluster shares, the
	// base64 of 32 random bytes (cluster.secret, env STROM_CLUSTER_SECRET;
	// no flag, to keep it out of process listings; `openssl rand -base64
	// 32` makes one). Nodes sign their calls to each other with it (an
	// HMAC-SHA256), and it keys the gossip's AES-256 encryption, so each
	// node must be given the same. Empty: the one in
	// <data.dir>/cluster.secret, which a node generates on first start;
	// that works for a single node only, so Validate requires the key when
	// clustering (cluster.join or cluster.bootstrap-expect above 1).
	ClusterSecret string
	// DefaultBucketNumber is a table's bucket count when it names none
	// (default.bucket.number).
	DefaultBucketNumber int
	// DefaultReplicationFactor is a table's replication factor when it names
	// none (default.replication.factor).
	DefaultReplicationFactor int
	// SessionTimeout is how long the metadata leader waits without a heartbeat
	// before expiring this node's session and its registration
	// (zookeeper.session.timeout in Fluss's naming: session.timeout).
	SessionTimeout time.Duration
	// ScannerTTL is how long an open ScanKv scanner lives without a call
	// (kv.scanner.ttl).
	ScannerTTL time.Duration
	// ShutdownTimeout bounds a clean stop (shutdown.timeout).
	ShutdownTimeout time.Duration
	// SegmentBytes is the size at which a bucket's log rolls to a new
	// segment (log.segment.file-size, Fluss's key; default 1 GiB).
	SegmentBytes int64
	// FlushIntervalMessages makes a bucket's log fsync once this many
	// messages (records) have arrived since its last fsync; the high
	// watermark (what acks=-1 writes and consumers wait for) then waits for
	// the fsync (log.flush.interval-messages, Kafka's and Fluss's key;
	// default 9223372036854775807, never: like Kafka and Fluss, Strom
	// leaves fsyncs to the kernel and durability to replication).
	FlushIntervalMessages int64
	// FlushIntervalMs makes a bucket's log fsync data this many
	// milliseconds after its last fsync, the high watermark waiting
	// likewise (log.flush.interval-ms, Kafka's key; default
	// 9223372036854775807, never).
	FlushIntervalMs int64
	// WriterIDExpirationTime is how long a bucket remembers an idempotent
	// writer after its last batch (server.writer-id.expiration-time, Fluss's
	// key; default 7 days). A writer idle for longer must start again at
	// sequence 0.
	WriterIDExpirationTime time.Duration
	// WriterIDExpirationCheckInterval is how often expired writers are
	// forgotten (server.writer-id.expiration-check-interval, Fluss's key;
	// default 10 minutes).
	WriterIDExpirationCheckInterval time.Duration
	// ReplicaMaxLagTime is how long a follower may go without catching up
	// with its leader's log end before the leader has it leave the ISR
	// (log.replica.max-lag-time, Fluss's key and default: 30 s). The leader
	// checks every half of it (Kafka's ISR expiration).
	ReplicaMaxLagTime time.Duration
	// MinInSyncReplicas is the fewest in-sync replicas a bucket needs to
	// take an acks=-1 write; with fewer the write fails at once with
	// NOT_ENOUGH_REPLICAS (log.replica.min-in-sync-replicas-number, Fluss's
	// key and default: 1).
	MinInSyncReplicas int
	// LogValidationFull makes ProduceLog decompress and decode every Arrow
	// batch before appending it (log.validation.full; default false), as
	// Kafka's broker validates compressed batches: a batch whose compressed
	// buffers are damaged is then refused at produce instead of failing its
	// readers. Off, produce checks what the readers check without
	// decompressing (the metadata, each buffer's frame magic and declared
	// size); docs/benchmarks.md has the cost of each.
	LogValidationFull bool
	// SegmentVerifyRate bounds, in bytes per second, the background check
	// of sealed log segments' CRCs (log.segment.verify-rate; default 1 MiB/s,
	// HDFS's block scanner rate; 0 turns the check off). The check goes
	// round every sealed segment of the node, again and again.
	SegmentVerifyRate int64
	// ReplicaFetchMaxBytes bounds, in bytes, the batches of one response to
	// a follower's fetch (log.replica.fetch.max-bytes, Fluss's key and
	// default: 16 MiB); at least one batch is sent whatever its size.
	ReplicaFetchMaxBytes int64
	// ReplicaFetchMaxBytesForBucket bounds, in bytes, one bucket's batches
	// in it (log.replica.fetch.max-bytes-for-bucket; Fluss: 1 MiB).
	ReplicaFetchMaxBytesForBucket int64
	// ReplicaFetchWaitMaxTime is how long a leader holds a follower's fetch
	// that has nothing to answer (log.replica.fetch.wait-max-time; Fluss:
	// 500 ms).
	ReplicaFetchWaitMaxTime time.Duration
	// ReplicaFetchBackoff is a follower's pause after a failed fetch: of
	// the bucket that failed, or of every bucket followed from a leader
	// that cannot be reached (log.replica.fetch.backoff-interval; Fluss: 1 s).
	ReplicaFetchBackoff time.Duration
	// ZooKeeperListen, when set, serves the ZooKeeper wire protocol over the
	// metadata tree on this address (zookeeper.listen, --zookeeper-listen;
	// off when empty; 127.0.0.1:2181 is ZooKeeper's usual port).
	ZooKeeperListen string
	// FlussListen, when set, serves Apache Fluss's wire protocol on this
	// address (fluss.listen, --fluss-listen; off when empty; 127.0.0.1:9123
	// is Fluss's usual port): the catalog keys so far (fluss/DESIGN.md); its
	// frames are bounded by netty.server.max-request-size.
	FlussListen string
	// FlussAdvertise is the Fluss address clients are told to use
	// (fluss.advertise, in GET_METADATA's tablet_servers); derived from
	// FlussListen like Advertise.
	FlussAdvertise string
	// DatalakeFormat is the lake format of the cluster's lake tables
	// (datalake.format, Fluss's key; "" or paimon). With it set, every new
	// table gets table.datalake.format (unless it sets one), and a table
	// with table.datalake.enabled gets its Paimon table created in
	// DatalakePaimonWarehouse, as Fluss's coordinator does; without it a
	// lake table is refused. Empty: no lake.
	DatalakeFormat string
	// DatalakePaimonMetastore is the Paimon catalog's metastore
	// (datalake.paimon.metastore; only filesystem, the default).
	DatalakePaimonMetastore string
	// DatalakePaimonWarehouse is the Paimon warehouse (datalake.paimon.
	// warehouse): an absolute directory or file: URI, shared by the nodes
	// and the tiering job. Fluss clients get these two as the lake table's
	// table.datalake.paimon.metastore / .warehouse, which Flink's $lake and
	// union reads open the Paimon catalog with.
	DatalakePaimonWarehouse string
	// Pprof serves Go's profiler under /debug/pprof/ on the API port
	// (debug.pprof, --pprof). Off by default.
	Pprof bool
	// LogFormat is "text" or "json" (log.format, --log-format).
	LogFormat string
	// LogLevel is debug, info, warn or error (log.level, --log-level).
	LogLevel string

	// Remote storage (Fluss's keys): log tiering (replica/tier.go) keeps
	// log segments there; KV snapshots (issue 14) will too.

	// RemoteDataDir is where cold data goes (remote.data.dir, Fluss's
	// key): file:///path or file://./relative/path for a directory,
	// s3://bucket/prefix for S3 or an S3-compatible server. Empty: the
	// directory remote under data.dir.
	RemoteDataDir string
	// S3Endpoint is the S3 service's URL, http(s)://host[:port]
	// (s3.endpoint; empty: AWS's endpoint for s3.region).
	S3Endpoint string
	// S3Region is the region requests are signed for (s3.region; empty:
	// the AWS SDK's chain, AWS_REGION or the shared config, else
	// us-east-1).
	S3Region string
	// S3AccessKey and S3SecretKey are static credentials (s3.access-key,
	// s3.secret-key; no flags, to keep them out of process listings).
	// Empty: the AWS SDK's default chain (AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, the shared credentials file, web identity,
	// the instance role).
	S3AccessKey, S3SecretKey string
	// S3PathStyleAccess addresses buckets as endpoint/bucket rather than
	// bucket.endpoint (s3.path.style.access, Hadoop S3A's
	// fs.s3a.path.style.access, which Fluss's s3.* keys map to; default
	// true, unlike S3A: every S3-compatible server takes it, and AWS still
	// does).
	S3PathStyleAccess bool
	// RemoteLogTaskInterval is how often each bucket leader copies its
	// rolled log segments to remote.data.dir and commits them
	// (remote.log.task-interval-duration, Fluss's key and default: 1
	// minute; 0 turns tiering off). Tiering runs only when remote.data.dir
	// is set: the default directory under data.dir is one node's, and a
	// new leader must read what the old one tiered.
	RemoteLogTaskInterval time.Duration
	// RemoteLogCacheSize bounds, in bytes, the remote log segments a node
	// keeps downloaded (under data.dir/remote-log-cache) to serve fetches
	// below the local log start (remote.log.cache-size; default 1 GiB). A
	// segment being read stays even when it alone is larger.
	RemoteLogCacheSize int64
	// KvSnapshotInterval is how often each primary-key bucket leader takes
	// a snapshot of its KV to remote.data.dir, after which the changelog
	// below the oldest retained snapshot is trimmed (kv.snapshot.interval,
	// Fluss's key and default: 10 minutes; 0 turns snapshots off, and the
	// changelog is then kept whole). Like tiering, only when
	// remote.data.dir is set.
	KvSnapshotInterval time.Duration
	// KvSnapshotNumRetained is how many KV snapshots each bucket keeps
	// (kv.snapshot.num-retained, Fluss's key and default: 1).
	KvSnapshotNumRetained int

	// Limits: what one client or request may take of the node. Each refusal
	// names its key (server/DESIGN.md, "Limits").

	// MaxConnections is the most API connections open at once
	// (max.connections, Kafka's name); one more is closed as it is accepted.
	// The Fluss port (fluss.listen) has this cap and the per-IP one too,
	// counted separately.
	MaxConnections int
	// MaxConnectionsPerIP is the most API connections open at once from one
	// client IP (max.connections.per.ip, Kafka's name).
	MaxConnectionsPerIP int
	// IdleTimeout closes an API connection with no request in flight for
	// this long (netty.connection.max-idle-time, Fluss's name; Kafka's
	// connections.max.idle.ms; default 10 minutes), and a Fluss-port
	// (fluss.listen) connection that sends no request for this long.
	IdleTimeout time.Duration
	// ReadTimeout is the longest a client may take to send a request's
	// headers, and the longest a request body may go without a byte arriving
	// (api.read-timeout). A body that keeps arriving, however slowly, is
	// read to its end; a long-poll fetch waits as long as it asks.
	ReadTimeout time.Duration
	// MaxConcurrentStreams is the most requests in flight on one HTTP/2
	// connection (api.http2.max-concurrent-streams; HTTP/2's
	// SETTINGS_MAX_CONCURRENT_STREAMS, Go's default 250).
	MaxConcurrentStreams int
	// MaxRequestBytes is the largest request body, in bytes
	// (netty.server.max-request-size, Fluss's name; Kafka's
	// socket.request.max.bytes; default 100 MiB).
	MaxRequestBytes int64
	// FetchMaxBytes bounds a FetchLog response and each of its buckets, in
	// bytes, whatever the request asks (fetch.max.bytes, Kafka's broker key;
	// default 55 MiB). As in Kafka, a bucket's first batch is returned even
	// when larger, so a consumer always progresses. It also bounds the
	// stored bytes a projected fetch reads to serve its buckets'.
	FetchMaxBytes int64
	// FetchJSONMaxRows bounds the rows of a FetchLog response as JSON, which
	// the node decodes (fetch.json.max-rows; 10000). The response ends
	// before a batch that would pass it; a batch larger than it alone is
	// refused with LIMIT_EXCEEDED (fetch it as Arrow).
	FetchJSONMaxRows int
	// ScannerMaxPerBucket and ScannerMaxPerServer bound the ScanKv scanners
	// open at once on one bucket and on this node (kv.scanner.max-per-bucket,
	// kv.scanner.max-per-server: Fluss's names and defaults, 8 and 200).
	ScannerMaxPerBucket, ScannerMaxPerServer int
	// ScannerMaxBatchBytes caps the bytes of one ScanKv response, whatever
	// batch_size_bytes asks (kv.scanner.max-batch-size, Fluss's; 10 MiB).
	ScannerMaxBatchBytes int64
	// PrefixLookupMaxBytes bounds the rows of one PrefixLookup response, in
	// bytes of KV values (kv.prefix-lookup.max-bytes; 10 MiB). A lookup
	// that finds more fails with LIMIT_EXCEEDED rather than return part.
	PrefixLookupMaxBytes int64
	// LookupMaxBytes bounds the values of one Lookup response (Connect's
	// Lookup, Fluss's LOOKUP), all buckets together, in bytes of KV values
	// (kv.lookup.max-bytes; 64 MiB). A lookup whose values pass it fails
	// with LIMIT_EXCEEDED rather than return part: neither API has a
	// continuation, and a request of small keys could otherwise make the
	// node build a reply of any size.
	LookupMaxBytes int64
	// ZooKeeperMaxPacket is the largest packet the ZooKeeper shim accepts,
	// in bytes (zookeeper.jute.maxbuffer; ZooKeeper's jute.maxbuffer,
	// 0xfffff). A longer one closes the connection, as in ZooKeeper; it also
	// bounds a znode's data. At most 32 MiB: half of what a follower can
	// forward to the metadata leader (raftmeta.MaxForwardBytes), so that a
	// write a node accepts goes through on every node.
	ZooKeeperMaxPacket int
	// ZooKeeperMaxClientCnxns is the most ZooKeeper connections from one
	// client IP (zookeeper.maxClientCnxns; ZooKeeper's maxClientCnxns, 60).
	ZooKeeperMaxClientCnxns int
	// ZooKeeperMaxCnxns is the most ZooKeeper connections in all
	// (zookeeper.maxCnxns; ZooKeeper's maxCnxns, whose default 0 is no
	// limit; Strom's is 1024).
	ZooKeeperMaxCnxns int
}

// DefaultConfig is a complete single-node cluster in ./strom-data.
func DefaultConfig() Config {
	return Config{
		NodeID:                   1,
		DataDir:                  "./strom-data",
		Listen:                   ":9123",
		RaftListen:               ":9124",
		GossipListen:             ":9125",
		BootstrapExpect:          1,
		RaftVoters:               3,
		DeadVoterGrace:           30 * time.Second,
		ServerStabilizationTime:  10 * time.Second,
		DeadNodeCleanup:          72 * time.Hour,
		GossipTimings:            membership.DefaultTimings(),
		DefaultBucketNumber:      1,
		DefaultReplicationFactor: 1,
		SessionTimeout:           30 * time.Second,
		SegmentBytes:             1 << 30,
		FlushIntervalMessages:    math.MaxInt64,
		FlushIntervalMs:          math.MaxInt64,
		ShutdownTimeout:          30 * time.Second,
		ScannerTTL:               time.Minute,
		SegmentVerifyRate:        1 << 20,

		// Replica fetching (Fluss's keys and defaults).
		ReplicaFetchMaxBytes:          16 << 20,
		ReplicaFetchMaxBytesForBucket: 1 << 20,
		ReplicaFetchWaitMaxTime:       500 * time.Millisecond,
		ReplicaFetchBackoff:           time.Second,
		LogFormat:                     "text",
		LogLevel:                      "info",

		// Idempotent writers' state (Fluss's keys and defaults).
		WriterIDExpirationTime:          7 * 24 * time.Hour,
		WriterIDExpirationCheckInterval: 10 * time.Minute,

		// Replication (Fluss's keys and defaults).
		ReplicaMaxLagTime: 30 * time.Second,
		MinInSyncReplicas: 1,

		MaxConnections:          8192,
		MaxConnectionsPerIP:     2048,
		IdleTimeout:             10 * time.Minute,
		ReadTimeout:             30 * time.Second,
		MaxConcurrentStreams:    250,
		MaxRequestBytes:         100 << 20,
		FetchMaxBytes:           55 << 20,
		FetchJSONMaxRows:        10000,
		ScannerMaxPerBucket:     8,
		ScannerMaxPerServer:     200,
		ScannerMaxBatchBytes:    10 << 20,
		PrefixLookupMaxBytes:    10 << 20,
		LookupMaxBytes:          64 << 20,
		ZooKeeperMaxPacket:      0xfffff,
		ZooKeeperMaxClientCnxns: 60,
		ZooKeeperMaxCnxns:       1024,

		S3PathStyleAccess:     true,
		RemoteLogTaskInterval: time.Minute,
		RemoteLogCacheSize:    1 << 30,
		KvSnapshotInterval:    10 * time.Minute,
		KvSnapshotNumRetained: 1,
	}
}

// Key describes one configuration key: its name in the YAML file, the flag
// that sets it (if any), and how to read it.
type Key struct {
	Name  string // YAML key, e.g. "data.dir"
	Flag  string // command-line flag without dashes, "" when none
	Usage string
	// Bool marks a true/false key: its flag may be given without a value.
	Bool bool
	set  func(c *Config, v string) error
	get  func(c *Config) string
}

// EnvName is the environment variable for a key: STROM_ then the name in
// upper case with '.' and '-' as '_' (data.dir → STROM_DATA_DIR).
func (k Key) EnvName() string {
	return "STROM_" + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToUpper(k.Name))
}

// Get returns the key's value in c as text.
func (k Key) Get(c *Config) string { return k.get(c) }

// Set parses v into c.
func (k Key) Set(c *Config, v string) error { return k.set(c, v) }

func stringKey(name, flag, usage string, field func(*Config) *string) Key {
	return Key{Name: name, Flag: flag, Usage: usage,
		set: func(c *Config, v string) error { *field(c) = v; return nil },
		get: func(c *Config) string { return *field(c) }}
}

func intKey(name, flag, usage string, field func(*Config) *int) Key {
	return Key{Name: name, Flag: flag, Usage: usage,
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("want a whole number, got %q", v)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(*field(c)) }}
}

func int64Key(name, usage string, field func(*Config) *int64) Key {
	return Key{Name: name, Usage: usage,
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return fmt.Errorf("want a whole number, got %q", v)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*field(c), 10) }}
}

func boolKey(name, flag, usage string, field func(*Config) *bool) Key {
	return Key{Name: name, Flag: flag, Usage: usage, Bool: true,
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("want true or false, got %q", v)
			}
			*field(c) = b
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) }}
}

// listKey is a comma-separated list; blanks around items and empty items
// are dropped.
func listKey(name, flag, usage string, field func(*Config) *[]string) Key {
	return Key{Name: name, Flag: flag, Usage: usage,
		set: func(c *Config, v string) error {
			var items []string
			for _, it := range strings.Split(v, ",") {
				if it = strings.TrimSpace(it); it != "" {
					items = append(items, it)
				}
			}
			*field(c) = items
			return nil
		},
		get: func(c *Config) string { return strings.Join(*field(c), ",") }}
}

func durationKey(name, flag, usage string, field func(*Config) *time.Duration) Key {
	return Key{Name: name, Flag: flag, Usage: usage,
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("want a duration like 30s or 2m, got %q", v)
			}
			*field(c) = d
			return nil
		},
		get: func(c *Config) string { return field(c).String() }}
}

// Keys lists every configuration key.
func Keys() []Key {
	return []Key{
		{Name: "node.id", Flag: "node-id", Usage: "node id, unique in the cluster",
			set: func(c *Config, v string) error {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
				if err != nil {
					return fmt.Errorf("want a whole number, got %q", v)
				}
				c.NodeID = int32(n)
				return nil
			},
			get: func(c *Config) string { return strconv.Itoa(int(c.NodeID)) }},
		stringKey("data.dir", "data-dir", "directory for the node's data",
			func(c *Config) *string { return &c.DataDir }),
		stringKey("api.listen", "listen", "API address (Connect, gRPC, gRPC-Web, HTTP JSON, /healthz)",
			func(c *Config) *string { return &c.Listen }),
		stringKey("api.advertise", "advertise", "API address given to clients and other nodes",
			func(c *Config) *string { return &c.Advertise }),
		stringKey("raft.listen", "raft-listen", "Raft transport address",
			func(c *Config) *string { return &c.RaftListen }),
		stringKey("raft.advertise", "raft-advertise", "Raft address other nodes dial",
			func(c *Config) *string { return &c.RaftAdvertise }),
		stringKey("node.source-ip", "", "local IP that connections to other nodes are made from (empty: the OS's choice)",
			func(c *Config) *string { return &c.SourceIP }),
		stringKey("gossip.listen", "gossip-listen", "membership (gossip) address, TCP and UDP",
			func(c *Config) *string { return &c.GossipListen }),
		stringKey("gossip.advertise", "gossip-advertise", "gossip address other nodes are told to use",
			func(c *Config) *string { return &c.GossipAdvertise }),
		durationKey("gossip.probe-interval", "", "how often gossip probes a random member",
			func(c *Config) *time.Duration { return &c.GossipTimings.ProbeInterval }),
		durationKey("gossip.probe-timeout", "", "how long a probe waits for an answer before asking other members to try (below gossip.probe-interval)",
			func(c *Config) *time.Duration { return &c.GossipTimings.ProbeTimeout }),
		intKey("gossip.suspicion-mult", "", "a member that fails a probe is declared dead after this many probe intervals (scaled up on large clusters) unless it refutes",
			func(c *Config) *int { return &c.GossipTimings.SuspicionMult }),
		listKey("cluster.join", "join", "gossip addresses (host:port, comma-separated) of nodes of the cluster to join; retried until one answers",
			func(c *Config) *[]string { return &c.Join }),
		intKey("cluster.bootstrap-expect", "bootstrap-expect", "nodes that must see each other before the first start bootstraps the metadata group (1: a single node)",
			func(c *Config) *int { return &c.BootstrapExpect }),
		intKey("raft.voters", "", "how many nodes vote in the metadata group (the rest are non-voters)",
			func(c *Config) *int { return &c.RaftVoters }),
		stringKey("node.rack", "rack", "rack or zone of the node, for rack-aware placement",
			func(c *Config) *string { return &c.Rack }),
		durationKey("cluster.dead-voter-grace", "", "how long a voter may be dead before a live non-voter replaces it",
			func(c *Config) *time.Duration { return &c.DeadVoterGrace }),
		durationKey("cluster.server-stabilization-time", "", "how long a non-voter must be alive before it is promoted to voter",
			func(c *Config) *time.Duration { return &c.ServerStabilizationTime }),
		durationKey("cluster.dead-node-cleanup", "", "how long a node may be dead before it is removed from the metadata group",
			func(c *Config) *time.Duration { return &c.DeadNodeCleanup }),
		stringKey("zookeeper.listen", "zookeeper-listen", "serve the ZooKeeper wire protocol on this address (empty: off)",
			func(c *Config) *string { return &c.ZooKeeperListen }),
		stringKey("fluss.listen", "fluss-listen", "serve Apache Fluss's wire protocol on this address (empty: off)",
			func(c *Config) *string { return &c.FlussListen }),
		stringKey("fluss.advertise", "fluss-advertise", "Fluss address given to Fluss clients (default: fluss.listen, an unspecified host as 127.0.0.1)",
			func(c *Config) *string { return &c.FlussAdvertise }),
		stringKey("datalake.format", "datalake-format", "lake format of lake tables (table.datalake.enabled): paimon, or empty for no lake",
			func(c *Config) *string { return &c.DatalakeFormat }),
		stringKey("datalake.paimon.metastore", "", "metastore of the Paimon lake catalog (filesystem)",
			func(c *Config) *string { return &c.DatalakePaimonMetastore }),
		stringKey("datalake.paimon.warehouse", "datalake-paimon-warehouse", "Paimon warehouse of the lake tables: an absolute directory or file: URI shared by the nodes and the tiering job",
			func(c *Config) *string { return &c.DatalakePaimonWarehouse }),
		stringKey("cluster.id", "cluster-id", "expected cluster id (empty accepts any)",
			func(c *Config) *string { return &c.ClusterID }),
		stringKey("cluster.secret", "", "secret shared by the cluster's nodes: base64 of 32 bytes (empty: the one in data.dir, generated on first start)",
			func(c *Config) *string { return &c.ClusterSecret }),
		intKey("default.bucket.number", "", "buckets of a table that names none",
			func(c *Config) *int { return &c.DefaultBucketNumber }),
		intKey("default.replication.factor", "", "replication factor of a table that names none",
			func(c *Config) *int { return &c.DefaultReplicationFactor }),
		sizeKey("log.segment.file-size", "size at which a bucket's log rolls to a new segment (e.g. 1gb, 256mb)",
			func(c *Config) *int64 { return &c.SegmentBytes }),
		boolKey("log.validation.full", "", "decompress and decode every produced Arrow batch before appending it (true or false)",
			func(c *Config) *bool { return &c.LogValidationFull }),
		int64Key("log.flush.interval-messages", "fsync a bucket's log after this many messages; acks=-1 and reads wait for it (9223372036854775807: never)",
			func(c *Config) *int64 { return &c.FlushIntervalMessages }),
		int64Key("log.flush.interval-ms", "fsync a bucket's log this many milliseconds after its last fsync; acks=-1 and reads wait for it (9223372036854775807: never)",
			func(c *Config) *int64 { return &c.FlushIntervalMs }),
		sizeKey("log.segment.verify-rate", "bytes per second of the background CRC check of sealed log segments (e.g. 1mb; 0: off)",
			func(c *Config) *int64 { return &c.SegmentVerifyRate }),
		sizeKey("log.replica.fetch.max-bytes", "most bytes of batches in one response to a follower's fetch (e.g. 16mb)",
			func(c *Config) *int64 { return &c.ReplicaFetchMaxBytes }),
		sizeKey("log.replica.fetch.max-bytes-for-bucket", "most bytes of one bucket's batches in a response to a follower's fetch (e.g. 1mb)",
			func(c *Config) *int64 { return &c.ReplicaFetchMaxBytesForBucket }),
		durationKey("log.replica.fetch.wait-max-time", "", "longest a leader holds a follower's fetch that has nothing to answer",
			func(c *Config) *time.Duration { return &c.ReplicaFetchWaitMaxTime }),
		durationKey("log.replica.fetch.backoff-interval", "", "a follower's pause after a failed fetch (of the bucket, or of every bucket from a leader that cannot be reached)",
			func(c *Config) *time.Duration { return &c.ReplicaFetchBackoff }),
		boolKey("debug.pprof", "pprof", "serve Go's profiler under /debug/pprof/ (true or false)",
			func(c *Config) *bool { return &c.Pprof }),
		durationKey("session.timeout", "", "metadata session timeout of the node",
			func(c *Config) *time.Duration { return &c.SessionTimeout }),
		durationKey("kv.scanner.ttl", "", "how long an unused ScanKv scanner lives",
			func(c *Config) *time.Duration { return &c.ScannerTTL }),
		durationKey("shutdown.timeout", "", "longest a clean stop may take",
			func(c *Config) *time.Duration { return &c.ShutdownTimeout }),
		durationKey("server.writer-id.expiration-time", "", "how long a bucket remembers an idle idempotent writer (e.g. 168h)",
			func(c *Config) *time.Duration { return &c.WriterIDExpirationTime }),
		durationKey("server.writer-id.expiration-check-interval", "", "how often expired idempotent writers are forgotten",
			func(c *Config) *time.Duration { return &c.WriterIDExpirationCheckInterval }),
		durationKey("log.replica.max-lag-time", "", "how long a follower may lag behind its leader's log end before it leaves the ISR",
			func(c *Config) *time.Duration { return &c.ReplicaMaxLagTime }),
		intKey("log.replica.min-in-sync-replicas-number", "", "fewest in-sync replicas a bucket needs to take an acks=-1 write",
			func(c *Config) *int { return &c.MinInSyncReplicas }),
		stringKey("log.format", "log-format", "log format: text or json",
			func(c *Config) *string { return &c.LogFormat }),
		stringKey("log.level", "log-level", "log level: debug, info, warn or error",
			func(c *Config) *string { return &c.LogLevel }),

		// Remote storage.
		stringKey("remote.data.dir", "", "where cold data goes: file:///path, file://./relative/path or s3://bucket/prefix (empty: the directory remote under data.dir)",
			func(c *Config) *string { return &c.RemoteDataDir }),
		stringKey("s3.endpoint", "", "S3 service URL, http(s)://host[:port] (empty: AWS's endpoint for s3.region)",
			func(c *Config) *string { return &c.S3Endpoint }),
		stringKey("s3.region", "", "S3 region requests are signed for (empty: AWS_REGION or the shared config, else us-east-1)",
			func(c *Config) *string { return &c.S3Region }),
		stringKey("s3.access-key", "", "S3 access key id (empty, with s3.secret-key: the AWS SDK's default credential chain)",
			func(c *Config) *string { return &c.S3AccessKey }),
		stringKey("s3.secret-key", "", "S3 secret access key",
			func(c *Config) *string { return &c.S3SecretKey }),
		boolKey("s3.path.style.access", "", "address buckets as endpoint/bucket, not bucket.endpoint (true or false)",
			func(c *Config) *bool { return &c.S3PathStyleAccess }),
		durationKey("remote.log.task-interval-duration", "", "how often bucket leaders copy rolled log segments to remote.data.dir (tiering runs only when remote.data.dir is set; 0: off)",
			func(c *Config) *time.Duration { return &c.RemoteLogTaskInterval }),
		sizeKey("remote.log.cache-size", "most bytes of remote log segments kept downloaded to serve fetches below the local log start (e.g. 1gb)",
			func(c *Config) *int64 { return &c.RemoteLogCacheSize }),
		durationKey("kv.snapshot.interval", "", "how often primary-key bucket leaders snapshot their KV to remote.data.dir, trimming the changelog below the oldest retained snapshot (only when remote.data.dir is set; 0: off)",
			func(c *Config) *time.Duration { return &c.KvSnapshotInterval }),
		intKey("kv.snapshot.num-retained", "", "KV snapshots each bucket keeps in remote storage",
			func(c *Config) *int { return &c.KvSnapshotNumRetained }),

		// Limits.
		intKey("max.connections", "", "most API connections open at once",
			func(c *Config) *int { return &c.MaxConnections }),
		intKey("max.connections.per.ip", "", "most API connections open at once from one client IP",
			func(c *Config) *int { return &c.MaxConnectionsPerIP }),
		durationKey("netty.connection.max-idle-time", "", "close an API connection idle this long",
			func(c *Config) *time.Duration { return &c.IdleTimeout }),
		durationKey("api.read-timeout", "", "longest wait for a request's headers, or for the next byte of its body",
			func(c *Config) *time.Duration { return &c.ReadTimeout }),
		intKey("api.http2.max-concurrent-streams", "", "most requests in flight on one HTTP/2 connection",
			func(c *Config) *int { return &c.MaxConcurrentStreams }),
		sizeKey("netty.server.max-request-size", "largest request body (e.g. 100mb)",
			func(c *Config) *int64 { return &c.MaxRequestBytes }),
		sizeKey("fetch.max.bytes", "most bytes of a FetchLog response and of each of its buckets (e.g. 55mb)",
			func(c *Config) *int64 { return &c.FetchMaxBytes }),
		intKey("fetch.json.max-rows", "", "most rows of a FetchLog response as JSON",
			func(c *Config) *int { return &c.FetchJSONMaxRows }),
		intKey("kv.scanner.max-per-bucket", "", "most ScanKv scanners open at once on one bucket",
			func(c *Config) *int { return &c.ScannerMaxPerBucket }),
		intKey("kv.scanner.max-per-server", "", "most ScanKv scanners open at once on the node",
			func(c *Config) *int { return &c.ScannerMaxPerServer }),
		sizeKey("kv.scanner.max-batch-size", "most bytes of one ScanKv response (e.g. 10mb)",
			func(c *Config) *int64 { return &c.ScannerMaxBatchBytes }),
		sizeKey("kv.prefix-lookup.max-bytes", "most bytes of rows in one PrefixLookup response (e.g. 10mb)",
			func(c *Config) *int64 { return &c.PrefixLookupMaxBytes }),
		sizeKey("kv.lookup.max-bytes", "most bytes of rows in one Lookup response, all buckets together (e.g. 64mb)",
			func(c *Config) *int64 { return &c.LookupMaxBytes }),
		intKey("zookeeper.jute.maxbuffer", "", "largest ZooKeeper packet, in bytes (ZooKeeper's jute.maxbuffer)",
			func(c *Config) *int { return &c.ZooKeeperMaxPacket }),
		intKey("zookeeper.maxClientCnxns", "", "most ZooKeeper connections from one client IP (0: no limit)",
			func(c *Config) *int { return &c.ZooKeeperMaxClientCnxns }),
		intKey("zookeeper.maxCnxns", "", "most ZooKeeper connections in all (0: no limit)",
			func(c *Config) *int { return &c.ZooKeeperMaxCnxns }),
	}
}

func sizeKey(name, usage string, field func(*Config) *int64) Key {
	return Key{Name: name, Usage: usage,
		set: func(c *Config, v string) error {
			n, err := record.ParseMemorySize(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("want a size like 10mb or 1gb, got %q", v)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*field(c), 10) }}
}

func keyByName(name string) (Key, bool) {
	for _, k := range Keys() {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// LoadFile applies a YAML file of flat "key: value" pairs (Fluss's
// server.yaml style) to c. Unknown keys are errors, every one reported.
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	var problems []error
	for _, name := range names {
		k, ok := keyByName(name)
		if !ok {
			problems = append(problems, fmt.Errorf("config file %s: unknown key %q (see `strom server --help` for the keys)", path, name))
			continue
		}
		if err := k.Set(c, fmt.Sprint(raw[name])); err != nil {
			problems = append(problems, fmt.Errorf("config file %s: %s: %w", path, name, err))
		}
	}
	return errors.Join(problems...)
}

// LoadEnv applies the STROM_* environment variables that name a key.
func (c *Config) LoadEnv(lookup func(string) (string, bool)) error {
	var problems []error
	for _, k := range Keys() {
		if v, ok := lookup(k.EnvName()); ok {
			if err := k.Set(c, v); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", k.EnvName(), err))
			}
		}
	}
	return errors.Join(problems...)
}

// Validate reports every problem at once, naming the key and its flag.
func (c Config) Validate() error {
	var problems []error
	bad := func(key, format string, args ...any) {
		k, _ := keyByName(key)
		where := key
		if k.Flag != "" {
			where += " (--" + k.Flag + ")"
		}
		problems = append(problems, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
	}
	if c.NodeID < 0 {
		bad("node.id", "must be ≥ 0, got %d", c.NodeID)
	}
	if c.DataDir == "" {
		bad("data.dir", "must not be empty")
	}
	switch c.DatalakeFormat {
	case "":
		if c.DatalakePaimonWarehouse != "" || c.DatalakePaimonMetastore != "" {
			bad("datalake.format", "must be paimon when datalake.paimon.* is set")
		}
	case "paimon":
		if m := c.DatalakePaimonMetastore; m != "" && m != "filesystem" {
			bad("datalake.paimon.metastore", "only filesystem is supported, got %q", m)
		}
		if c.DatalakePaimonWarehouse == "" {
			bad("datalake.paimon.warehouse", "must be set when datalake.format is paimon")
		} else if _, err := paimon.OpenWarehouse(c.DatalakePaimonWarehouse); err != nil {
			bad("datalake.paimon.warehouse", "%v", err)
		}
	default:
		bad("datalake.format", "only paimon is supported, got %q", c.DatalakeFormat)
	}
	for _, a := range []struct{ key, addr string }{
		{"api.listen", c.Listen}, {"raft.listen", c.RaftListen},
		{"api.advertise", c.Advertise}, {"raft.advertise", c.RaftAdvertise},
		{"zookeeper.listen", c.ZooKeeperListen}, {"fluss.listen", c.FlussListen}, {"fluss.advertise", c.FlussAdvertise},
		{"gossip.listen", c.GossipListen}, {"gossip.advertise", c.GossipAdvertise},
	} {
		if a.addr == "" && (strings.HasSuffix(a.key, "advertise") || a.key == "zookeeper.listen" || a.key == "fluss.listen") {
			continue
		}
		if _, port, err := net.SplitHostPort(a.addr); err != nil || port == "" {
			bad(a.key, "want host:port or :port, got %q", a.addr)
		}
	}
	if c.SourceIP != "" && net.ParseIP(c.SourceIP) == nil {
		bad("node.source-ip", "want an IP address, got %q", c.SourceIP)
	}
	if c.Listen != "" && c.Listen == c.RaftListen {
		bad("raft.listen", "must differ from api.listen (both are %q)", c.Listen)
	}
	if fixed := !strings.HasSuffix(c.GossipListen, ":0"); fixed && (c.GossipListen == c.Listen || c.GossipListen == c.RaftListen) {
		bad("gossip.listen", "must differ from api.listen and raft.listen (it is %q)", c.GossipListen)
	}
	for _, a := range c.Join {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			bad("cluster.join", "want host:port items, got %q", a)
		}
	}
	if t := c.GossipTimings; t.ProbeInterval <= 0 || t.ProbeTimeout <= 0 || t.ProbeTimeout >= t.ProbeInterval {
		bad("gossip.probe-timeout", "must be positive and below gossip.probe-interval (which must be positive), got %s and %s", t.ProbeTimeout, t.ProbeInterval)
	}
	if c.GossipTimings.SuspicionMult < 1 {
		bad("gossip.suspicion-mult", "must be ≥ 1, got %d", c.GossipTimings.SuspicionMult)
	}
	if c.BootstrapExpect < 1 {
		bad("cluster.bootstrap-expect", "must be ≥ 1 (1: a single node), got %d", c.BootstrapExpect)
	}
	if c.RaftVoters < 1 {
		bad("raft.voters", "must be ≥ 1 (3 or 5 are usual), got %d", c.RaftVoters)
	}
	if c.ClusterSecret != "" {
		if _, err := decodeClusterSecret(c.ClusterSecret); err != nil {
			bad("cluster.secret", "%v", err)
		}
	} else if c.clustering() {
		// A secret generated into one node's data directory is not the
		// others': their calls to each other and their gossip would fail.
		bad("cluster.secret", "must be set when clustering (cluster.join or cluster.bootstrap-expect above 1), to the same value on every node: make one with `openssl rand -base64 %d` and give it to each node as STROM_CLUSTER_SECRET", clusterSecretBytes)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"cluster.dead-voter-grace", c.DeadVoterGrace}, {"cluster.server-stabilization-time", c.ServerStabilizationTime}, {"cluster.dead-node-cleanup", c.DeadNodeCleanup}} {
		if d.v <= 0 {
			bad(d.key, "must be positive, got %s", d.v)
		}
	}
	if c.DeadNodeCleanup > 0 && c.DeadNodeCleanup < c.DeadVoterGrace {
		bad("cluster.dead-node-cleanup", "must be at least cluster.dead-voter-grace (%s), got %s", c.DeadVoterGrace, c.DeadNodeCleanup)
	}
	if c.DefaultBucketNumber < 1 {
		bad("default.bucket.number", "must be ≥ 1, got %d", c.DefaultBucketNumber)
	}
	if c.DefaultReplicationFactor < 1 {
		bad("default.replication.factor", "must be ≥ 1, got %d", c.DefaultReplicationFactor)
	}
	if c.SegmentBytes < 1<<10 || c.SegmentBytes > 1<<31-1 {
		bad("log.segment.file-size", "must be between 1kb and 2gb, got %d bytes", c.SegmentBytes)
	}
	if c.FlushIntervalMessages < 1 {
		bad("log.flush.interval-messages", "must be ≥ 1 (%d: never), got %d", int64(math.MaxInt64), c.FlushIntervalMessages)
	}
	if c.FlushIntervalMs < 1 {
		bad("log.flush.interval-ms", "must be ≥ 1 (%d: never), got %d", int64(math.MaxInt64), c.FlushIntervalMs)
	}
	// The high watermark waits for the fsync, so a count above 1 with no
	// interval would hold a quiet bucket's last writes until they time out.
	if c.FlushIntervalMessages > 1 && c.FlushIntervalMessages < math.MaxInt64 && c.FlushIntervalMs == math.MaxInt64 {
		bad("log.flush.interval-messages", "is %d but log.flush.interval-ms is unset: a bucket that receives fewer than %d more messages would never fsync, and its acks=-1 writes would wait until they time out; set log.flush.interval-ms too (e.g. 1000), or log.flush.interval-messages to 1",
			c.FlushIntervalMessages, c.FlushIntervalMessages)
	}
	if c.SegmentVerifyRate < 0 {
		bad("log.segment.verify-rate", "must be ≥ 0 bytes per second (0: off), got %d", c.SegmentVerifyRate)
	}
	for _, k := range []struct {
		key string
		v   int64
	}{{"log.replica.fetch.max-bytes", c.ReplicaFetchMaxBytes}, {"log.replica.fetch.max-bytes-for-bucket", c.ReplicaFetchMaxBytesForBucket}} {
		if k.v < 1 || k.v > math.MaxInt32 {
			bad(k.key, "must be between 1 byte and 2gb, got %d", k.v)
		}
	}
	if c.ReplicaFetchWaitMaxTime < time.Millisecond || c.ReplicaFetchWaitMaxTime > time.Minute {
		bad("log.replica.fetch.wait-max-time", "must be between 1ms and 1m, got %s", c.ReplicaFetchWaitMaxTime)
	}
	if c.ReplicaFetchBackoff < time.Millisecond {
		bad("log.replica.fetch.backoff-interval", "must be at least 1ms, got %s", c.ReplicaFetchBackoff)
	}
	if c.SessionTimeout < time.Second {
		bad("session.timeout", "must be at least 1s, got %s", c.SessionTimeout)
	}
	if c.ScannerTTL < time.Second {
		bad("kv.scanner.ttl", "must be at least 1s, got %s", c.ScannerTTL)
	}
	if c.ShutdownTimeout <= 0 {
		bad("shutdown.timeout", "must be positive, got %s", c.ShutdownTimeout)
	}
	if c.WriterIDExpirationTime <= 0 {
		bad("server.writer-id.expiration-time", "must be positive, got %s", c.WriterIDExpirationTime)
	}
	if c.WriterIDExpirationCheckInterval <= 0 {
		bad("server.writer-id.expiration-check-interval", "must be positive, got %s", c.WriterIDExpirationCheckInterval)
	}
	if c.ReplicaMaxLagTime < 2*time.Millisecond {
		bad("log.replica.max-lag-time", "must be at least 2ms, got %s", c.ReplicaMaxLagTime)
	}
	if c.ReplicaFetchWaitMaxTime >= c.ReplicaMaxLagTime {
		// An idle follower is caught up as of each answer to its long
		// poll: a poll as long as the lag would drop it from the ISR.
		bad("log.replica.max-lag-time", "must be longer than log.replica.fetch.wait-max-time (%s), got %s", c.ReplicaFetchWaitMaxTime, c.ReplicaMaxLagTime)
	}
	if c.MinInSyncReplicas < 1 {
		bad("log.replica.min-in-sync-replicas-number", "must be ≥ 1, got %d", c.MinInSyncReplicas)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log.format", "want text or json, got %q", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "want debug, info, warn or error, got %q", c.LogLevel)
	}

	// Remote storage.
	if c.DataDir != "" {
		var ue *remote.URLError
		if _, err := remote.ParseURL(c.RemoteURL()); errors.As(err, &ue) {
			bad("remote.data.dir", "%q: %s", ue.URL, ue.Reason)
		}
	}
	if c.RemoteLogTaskInterval < 0 {
		bad("remote.log.task-interval-duration", "must be 0 (off) or positive, got %s", c.RemoteLogTaskInterval)
	}
	if c.RemoteLogCacheSize < 1 {
		bad("remote.log.cache-size", "must be at least 1 byte, got %d", c.RemoteLogCacheSize)
	}
	if c.KvSnapshotInterval < 0 {
		bad("kv.snapshot.interval", "must be 0 (off) or positive, got %s", c.KvSnapshotInterval)
	}
	if c.KvSnapshotNumRetained < 1 {
		bad("kv.snapshot.num-retained", "must be at least 1, got %d", c.KvSnapshotNumRetained)
	}
	if c.S3Endpoint != "" {
		if u, err := url.Parse(c.S3Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			bad("s3.endpoint", "want http://host[:port] or https://host[:port], got %q", c.S3Endpoint)
		}
	}
	if (c.S3AccessKey == "") != (c.S3SecretKey == "") {
		bad("s3.access-key", "and s3.secret-key must be set together (or neither, for the AWS SDK's default credential chain)")
	}

	// Limits.
	const below2GiB = 1<<31 - 1
	for _, l := range []struct {
		key            string
		v, least, most int64 // most: 0 for none
	}{
		{"max.connections", int64(c.MaxConnections), 1, 0},
		{"max.connections.per.ip", int64(c.MaxConnectionsPerIP), 1, 0},
		{"api.http2.max-concurrent-streams", int64(c.MaxConcurrentStreams), 1, 0},
		{"netty.server.max-request-size", c.MaxRequestBytes, 1 << 10, below2GiB},
		{"fetch.max.bytes", c.FetchMaxBytes, 1 << 10, below2GiB},
		{"fetch.json.max-rows", int64(c.FetchJSONMaxRows), 1, 0},
		{"kv.scanner.max-per-bucket", int64(c.ScannerMaxPerBucket), 1, 0},
		{"kv.scanner.max-per-server", int64(c.ScannerMaxPerServer), 1, 0},
		{"kv.scanner.max-batch-size", c.ScannerMaxBatchBytes, 1 << 10, below2GiB},
		{"kv.prefix-lookup.max-bytes", c.PrefixLookupMaxBytes, 1 << 10, below2GiB},
		{"kv.lookup.max-bytes", c.LookupMaxBytes, 1 << 10, below2GiB},
		{"zookeeper.jute.maxbuffer", int64(c.ZooKeeperMaxPacket), 1 << 10, raftmeta.MaxForwardBytes / 2},
		{"zookeeper.maxClientCnxns", int64(c.ZooKeeperMaxClientCnxns), 0, 0},
		{"zookeeper.maxCnxns", int64(c.ZooKeeperMaxCnxns), 0, 0},
	} {
		switch {
		case l.v < l.least:
			bad(l.key, "must be at least %d, got %d", l.least, l.v)
		case l.most > 0 && l.v > l.most:
			bad(l.key, "must be at most %d, got %d", l.most, l.v)
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"netty.connection.max-idle-time", c.IdleTimeout}, {"api.read-timeout", c.ReadTimeout}} {
		if d.v < time.Millisecond {
			bad(d.key, "must be at least 1ms, got %s", d.v)
		}
	}
	return errors.Join(problems...)
}

// RemoteURL is remote.data.dir, or when it is empty the directory remote
// under data.dir as a file URL.
func (c Config) RemoteURL() string {
	if c.RemoteDataDir != "" {
		return c.RemoteDataDir
	}
	dir := filepath.ToSlash(filepath.Join(c.DataDir, "remote"))
	if !filepath.IsAbs(dir) && !strings.HasPrefix(dir, "../") {
		dir = "./" + dir // file://./x: a relative path
	}
	return "file://" + dir
}

// RemoteOptions are the s3.* keys as the remote store's options.
func (c Config) RemoteOptions() remote.Options {
	return remote.Options{S3: remote.S3Options{
		Endpoint: c.S3Endpoint, Region: c.S3Region,
		AccessKey: c.S3AccessKey, SecretKey: c.S3SecretKey,
		VirtualHost: !c.S3PathStyleAccess,
	}}
}

// clustering reports whether the node is configured to be one of several:
// it joins others or waits for others to bootstrap with.
func (c Config) clustering() bool { return len(c.Join) > 0 || c.BootstrapExpect > 1 }

// flushInterval is log.flush.interval-ms as the log's FlushInterval: 0
// (never) for a value too large for a time.Duration.
func (c Config) flushInterval() time.Duration {
	if c.FlushIntervalMs > math.MaxInt64/int64(time.Millisecond) {
		return 0
	}
	return time.Duration(c.FlushIntervalMs) * time.Millisecond
}

// advertised returns addr with an unspecified host replaced by 127.0.0.1, or
// override when set.
func advertised(addr, override string) string {
	if override != "" {
		return override
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
