package listener

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/raftmeta/catalog"
)

// SmallNode is what the small keys (GET_TABLE_STATS, GET_LATEST_KV_SNAPSHOTS,
// GET_FILESYSTEM_SECURITY_TOKEN, DROP_KV_SNAPSHOT_LEASE; issue #17 key
// group 5) need of the node. Errors are Strom's domain errors, as for the
// other groups.
type SmallNode interface {
	// TableByID returns the table with the given id; an error wrapping
	// catalog.ErrTableNotExist when there is none.
	TableByID(id int64) (catalog.Table, error)
	// Table returns db.name after a Sync, as Catalog.Table.
	Table(ctx context.Context, db, name string) (catalog.Table, error)
	// RowCount is the number of rows of a bucket this node leads: for a
	// primary-key table its live keys as of the committed offset (every
	// acknowledged write counted), for a log table the records from the log
	// start to the high watermark (Fluss's definitions). An error wrapping
	// replica.ErrNotLeader when another node leads it.
	RowCount(ctx context.Context, t catalog.Table, bucket int32) (int64, error)
	// ChangelogStart is the first offset of the bucket's log a reader can
	// still fetch (from remote storage once tiered), as this node knows it:
	// from its replica of the bucket, else from the remote log manifest;
	// known is false when it has neither.
	ChangelogStart(t catalog.Table, bucket int32) (start int64, known bool, err error)
}

// smallHandlers are the small keys' handlers.
var smallHandlers = map[protocol.APIKey]handler{
	protocol.GetTableStats:              typed(hasSmall, (*Server).getTableStats),
	protocol.GetLatestKvSnapshots:       typed(hasSmall, (*Server).getLatestKvSnapshots),
	protocol.GetFilesystemSecurityToken: typed(always, (*Server).getFileSystemSecurityToken),
	protocol.DropKvSnapshotLease:        typed(always, (*Server).dropKvSnapshotLease),
}

func hasSmall(s *Server) bool { return s.cfg.Small != nil }

// getTableStats is GET_TABLE_STATS, what Flink's COUNT(*) push-down asks each
// bucket leader: per bucket its row count (SmallNode.RowCount) or its error
// (NOT_LEADER_OR_FOLLOWER for a bucket led elsewhere, so the client
// refreshes its metadata). target_columns (column statistics) is reserved
// in Fluss 0.9.1 and ignored, as there.
func (s *Server) getTableStats(ctx context.Context, _ int16, req *flusspb.GetTableStatsRequest) (proto.Message, error) {
	n := s.cfg.Small
	t, err := n.TableByID(req.GetTableId())
	if err != nil {
		return nil, fmt.Errorf("table id %d: %w", req.GetTableId(), err)
	}
	resp := &flusspb.GetTableStatsResponse{}
	for _, b := range req.BucketsReq {
		res := &flusspb.PbTableStatsRespForBucket{BucketId: proto.Int32(b.GetBucketId()), PartitionId: b.PartitionId}
		resp.BucketsResp = append(resp.BucketsResp, res)
		if err := bucketError(t, b.PartitionId, b.GetBucketId(), nil); err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
			continue
		}
		rows, err := n.RowCount(ctx, t, b.GetBucketId())
		if err != nil {
			setBucketError(&res.ErrorCode, &res.ErrorMessage, err)
			continue
		}
		res.RowCount = proto.Int64(rows)
	}
	return resp, nil
}

// getLatestKvSnapshots is GET_LATEST_KV_SNAPSHOTS, which Flink's source of a
// primary-key table asks when it starts: per bucket a snapshot to read
// first and the log offset to follow from. Strom's KV snapshots are Pebble
// checkpoints, which a Fluss client cannot open (it reads RocksDB files it
// downloads itself), so every bucket answers "no snapshot" (bucket_id only),
// which makes the client read the bucket's whole changelog from the log
// start, as Fluss's own answer before a bucket's first snapshot does. That is
// only complete while the changelog still starts at offset 0: a bucket whose
// log start has moved (retention) fails the request with
// LOG_OFFSET_OUT_OF_RANGE_EXCEPTION naming it, instead of a source that
// silently misses the rows below.
func (s *Server) getLatestKvSnapshots(ctx context.Context, _ int16, req *flusspb.GetLatestKvSnapshotsRequest) (proto.Message, error) {
	n := s.cfg.Small
	p := req.GetTablePath()
	if req.PartitionName != nil {
		return nil, errPartitioned
	}
	t, err := n.Table(ctx, p.GetDatabaseName(), p.GetTableName())
	if err != nil {
		return nil, err
	}
	if !t.Schema.HasPrimaryKey() {
		return nil, &Error{protocol.NonPrimaryKeyTableException, fmt.Sprintf("%s.%s is not a primary-key table: it has no KV snapshots", t.Database, t.Name)}
	}
	resp := &flusspb.GetLatestKvSnapshotsResponse{TableId: proto.Int64(t.Registration.TableID)}
	for b := range t.Registration.BucketCount {
		start, known, err := n.ChangelogStart(t, b)
		if err != nil {
			return nil, fmt.Errorf("%s.%s bucket %d: %w", t.Database, t.Name, b, err)
		}
		if known && start > 0 {
			return nil, &Error{protocol.LogOffsetOutOfRangeException, fmt.Sprintf(
				"%s.%s bucket %d: its changelog starts at offset %d, and Strom's KV snapshots (Pebble checkpoints) cannot be read by a Fluss client, so a reader from the log start would miss rows; read the table through Strom's Connect API (ScanKv) instead",
				t.Database, t.Name, b, start)}
		}
		resp.LatestSnapshots = append(resp.LatestSnapshots, &flusspb.PbKvSnapshot{BucketId: proto.Int32(b)})
	}
	return resp, nil
}

// getFileSystemSecurityToken is GET_FILESYSTEM_SECURITY_TOKEN. A Fluss
// client asks for it before it downloads remote files (KV snapshots, remote
// log segments); Strom's listener never hands a Fluss client a remote file
// (no snapshots above; FETCH_LOG reads tiered segments on the server), so it
// answers as Fluss does for a local file system: scheme "file", an empty
// token, no expiration.
func (s *Server) getFileSystemSecurityToken(context.Context, int16, *flusspb.GetFileSystemSecurityTokenRequest) (proto.Message, error) {
	return &flusspb.GetFileSystemSecurityTokenResponse{Schema: proto.String("file"), Token: []byte{}}, nil
}

// dropKvSnapshotLease is DROP_KV_SNAPSHOT_LEASE, which Flink's primary-key
// source sends when it closes, with the lease id it made up at start. Strom
// hands out no KV snapshots to Fluss clients, so no lease is ever held:
// dropping one is a success that does nothing.
func (s *Server) dropKvSnapshotLease(context.Context, int16, *flusspb.DropKvSnapshotLeaseRequest) (proto.Message, error) {
	return &flusspb.DropKvSnapshotLeaseResponse{}, nil
}
