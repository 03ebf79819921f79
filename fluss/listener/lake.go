package listener

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/raftmeta/catalog"
	"strom/record"
)

// LakeNode is what the lake keys (LAKE_TIERING_HEARTBEAT,
// PREPARE_LAKE_TABLE_SNAPSHOT, COMMIT_LAKE_TABLE_SNAPSHOT on the
// coordinator; GET_LAKE_SNAPSHOT on any server) need of the node. Errors
// are Strom's domain errors, as for the other groups.
type LakeNode interface {
	// Table returns db.name after a Sync, as Catalog.Table.
	Table(ctx context.Context, db, name string) (catalog.Table, error)
	// Tables returns every table after a Sync.
	Tables(ctx context.Context) ([]catalog.Table, error)
	// LakeTable returns a table's lake snapshots after a Sync.
	LakeTable(ctx context.Context, tableID int64) (catalog.LakeTable, error)
	// CoordinatorEpoch is this node's coordinator epoch; 0 when it is not
	// the coordinator.
	CoordinatorEpoch() int32
	// PrepareLakeOffsets and CommitLakeSnapshot are the coordinator's
	// (coordinator.PrepareLakeOffsets, CommitLakeSnapshot): on another node
	// they fail with the coordinator's ErrNotCoordinator.
	PrepareLakeOffsets(ctx context.Context, tableID int64, table string, offsets map[int32]int64, ignorePrevious bool) (string, error)
	CommitLakeSnapshot(ctx context.Context, c LakeCommit) error
}

// LakeCommit is one table's COMMIT_LAKE_TABLE_SNAPSHOT entry.
type LakeCommit struct {
	TableID, SnapshotID      int64
	TieredPath, ReadablePath string
	EarliestToKeep           *int64
}

// lakeHandlers are the lake keys' handlers.
var lakeHandlers = map[protocol.APIKey]handler{
	protocol.LakeTieringHeartbeat:     typed(hasLake, (*Server).lakeTieringHeartbeat),
	protocol.PrepareLakeTableSnapshot: typed(hasLake, (*Server).prepareLakeTableSnapshot),
	protocol.CommitLakeTableSnapshot:  typed(hasLake, (*Server).commitLakeTableSnapshot),
	protocol.GetLakeSnapshot:          typed(hasLake, (*Server).getLakeSnapshot),
}

func hasLake(s *Server) bool { return s.cfg.Lake != nil }

// errNotCoordinatorNode answers the coordinator's lake keys on a node that
// is not the coordinator (GET_METADATA names the one that is).
func errNotCoordinatorNode(api string) error {
	return &Error{protocol.InvalidCoordinatorException, api + ": this node is not the coordinator; refresh the metadata and send it to the coordinator_server it names"}
}

// lakeTables are the tables with table.datalake.enabled, for the schedule.
func (s *Server) lakeTables(ctx context.Context) ([]LakeTableInfo, error) {
	n := s.cfg.Lake
	tables, err := n.Tables(ctx)
	if err != nil {
		return nil, err
	}
	var out []LakeTableInfo
	for _, t := range tables {
		d := t.Descriptor()
		if v, _ := d.Option(record.OptDatalakeEnabled); !strings.EqualFold(v, "true") || d.IsPartitioned() {
			continue
		}
		v, _ := d.Option(record.OptDatalakeFreshness)
		fresh, err := record.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %s %q: %w", t.Database, t.Name, record.OptDatalakeFreshness, v, err)
		}
		info := LakeTableInfo{ID: t.Registration.TableID, Database: t.Database, Name: t.Name, Freshness: fresh}
		l, err := n.LakeTable(ctx, info.ID)
		if err != nil {
			return nil, err
		}
		if latest, ok := l.Latest(); ok {
			info.LastTiered = time.UnixMilli(latest.CommittedAt)
		}
		out = append(out, info)
	}
	return out, nil
}

// lakeTieringHeartbeat is LAKE_TIERING_HEARTBEAT, the tiering service's
// call to the coordinator: it reports the tables it tiers, finished and
// failed (each checked against the coordinator epoch and its tiering
// epoch, answered per table), and asks for a table to tier, which is the
// next whose table.datalake.freshness has passed since its last tiering.
func (s *Server) lakeTieringHeartbeat(ctx context.Context, _ int16, req *flusspb.LakeTieringHeartbeatRequest) (proto.Message, error) {
	epoch := s.cfg.Lake.CoordinatorEpoch()
	if epoch == 0 {
		return nil, errNotCoordinatorNode("LAKE_TIERING_HEARTBEAT")
	}
	lake, err := s.lakeTables(ctx)
	if err != nil {
		return nil, err
	}
	sched := s.tiering
	sched.update(epoch, lake)
	resp := &flusspb.LakeTieringHeartbeatResponse{CoordinatorEpoch: proto.Int32(epoch)}
	// Fluss's order: failed, tiering, then finished tables, each answered
	// on its own; one whose coordinator epoch is stale is not acted on.
	each := func(tables []*flusspb.PbHeartbeatReqForTable, out *[]*flusspb.PbHeartbeatRespForTable, act func(id, tieringEpoch int64) error) {
		for _, t := range tables {
			r := &flusspb.PbHeartbeatRespForTable{TableId: proto.Int64(t.GetTableId())}
			*out = append(*out, r)
			var err error
			if t.GetCoordinatorEpoch() != epoch {
				err = &Error{protocol.InvalidCoordinatorException, fmt.Sprintf("The coordinator epoch %d in request is not match current coordinator epoch %d for table %d.", t.GetCoordinatorEpoch(), epoch, t.GetTableId())}
			} else {
				err = act(t.GetTableId(), t.GetTieringEpoch())
			}
			if err != nil {
				c, m := errorCode(err)
				r.Error = &flusspb.ErrorResponse{ErrorCode: proto.Int32(int32(c)), ErrorMessage: proto.String(m)}
			}
		}
	}
	each(req.FailedTables, &resp.FailedTableResp, sched.fail)
	each(req.TieringTables, &resp.TieringTableResp, sched.heartbeat)
	forced := map[int64]bool{}
	for _, id := range req.ForceFinishedTables {
		forced[id] = true
	}
	each(req.FinishedTables, &resp.FinishedTableResp, func(id, e int64) error { return sched.finish(id, e, forced[id]) })
	if req.GetRequestTable() {
		if info, te, ok := sched.request(); ok {
			resp.TieringTable = &flusspb.PbLakeTieringTableInfo{
				TableId:      proto.Int64(info.ID),
				TablePath:    &flusspb.PbTablePath{DatabaseName: proto.String(info.Database), TableName: proto.String(info.Name)},
				TieringEpoch: proto.Int64(te),
			}
		}
	}
	return resp, nil
}

// prepareLakeTableSnapshot is PREPARE_LAKE_TABLE_SNAPSHOT: per table, the
// bucket log end offsets a tiering round wrote into the lake, merged over
// the last snapshot's unless ignore_previous_table_offsets, stored by the
// coordinator; the answer names them by a path the tiering service stores
// in the lake snapshot and sends back with COMMIT_LAKE_TABLE_SNAPSHOT.
// Errors are per table, as Fluss answers them.
func (s *Server) prepareLakeTableSnapshot(ctx context.Context, _ int16, req *flusspb.PrepareLakeTableSnapshotRequest) (proto.Message, error) {
	n := s.cfg.Lake
	if n.CoordinatorEpoch() == 0 {
		return nil, errNotCoordinatorNode("PREPARE_LAKE_TABLE_SNAPSHOT")
	}
	resp := &flusspb.PrepareLakeTableSnapshotResponse{}
	for _, t := range req.BucketOffsets {
		r := &flusspb.PbPrepareLakeTableRespForTable{}
		resp.PrepareLakeTableResp = append(resp.PrepareLakeTableResp, r)
		offsets := map[int32]int64{}
		var err error
		for _, b := range t.BucketOffsets {
			if b.PartitionId != nil {
				err = errPartitioned
				break
			}
			if b.LogEndOffset == nil {
				err = &Error{protocol.UnknownServerError, fmt.Sprintf("PREPARE_LAKE_TABLE_SNAPSHOT: table id %d bucket %d: log_end_offset is missing", t.GetTableId(), b.GetBucketId())}
				break
			}
			offsets[b.GetBucketId()] = b.GetLogEndOffset()
		}
		if err == nil {
			p := t.GetTablePath()
			var path string
			path, err = n.PrepareLakeOffsets(ctx, t.GetTableId(), p.GetDatabaseName()+"/"+p.GetTableName(), offsets, req.GetIgnorePreviousTableOffsets())
			if err == nil {
				r.TableId, r.LakeTableOffsetsPath = proto.Int64(t.GetTableId()), proto.String(path)
				continue
			}
		}
		setBucketError(&r.ErrorCode, &r.ErrorMessage, fmt.Errorf("PREPARE_LAKE_TABLE_SNAPSHOT: %w", err))
	}
	return resp, nil
}

// commitLakeTableSnapshot is COMMIT_LAKE_TABLE_SNAPSHOT: per table, a lake
// snapshot the tiering service committed, with the paths
// PREPARE_LAKE_TABLE_SNAPSHOT answered for its tiered (and readable)
// offsets and Fluss's retention (earliest_snapshot_id_to_keep); from then
// on GET_LAKE_SNAPSHOT answers it. Only the metadata form (Fluss ≥ 0.9,
// lake_table_snapshot_metadata) is served: tables_req alone (the 0.8 form)
// is refused naming the field, and alongside it is only metrics in Fluss
// and ignored here.
func (s *Server) commitLakeTableSnapshot(ctx context.Context, _ int16, req *flusspb.CommitLakeTableSnapshotRequest) (proto.Message, error) {
	n := s.cfg.Lake
	if n.CoordinatorEpoch() == 0 {
		return nil, errNotCoordinatorNode("COMMIT_LAKE_TABLE_SNAPSHOT")
	}
	if len(req.LakeTableSnapshotMetadata) == 0 && len(req.TablesReq) > 0 {
		return nil, &Error{protocol.UnknownServerError, "COMMIT_LAKE_TABLE_SNAPSHOT: tables_req without lake_table_snapshot_metadata is Fluss 0.8's form, which Strom does not serve; use a 0.9 tiering service"}
	}
	resp := &flusspb.CommitLakeTableSnapshotResponse{}
	for _, m := range req.LakeTableSnapshotMetadata {
		r := &flusspb.PbCommitLakeTableSnapshotRespForTable{TableId: proto.Int64(m.GetTableId())}
		resp.TableResp = append(resp.TableResp, r)
		err := n.CommitLakeSnapshot(ctx, LakeCommit{
			TableID: m.GetTableId(), SnapshotID: m.GetSnapshotId(),
			TieredPath: m.GetTieredBucketOffsetsFilePath(), ReadablePath: m.GetReadableBucketOffsetsFilePath(),
			EarliestToKeep: m.EarliestSnapshotIdToKeep,
		})
		if err != nil {
			setBucketError(&r.ErrorCode, &r.ErrorMessage, fmt.Errorf("COMMIT_LAKE_TABLE_SNAPSHOT: %w", err))
		}
	}
	return resp, nil
}

// getLakeSnapshot is GET_LAKE_SNAPSHOT: a table's latest lake snapshot (or
// the one with snapshot_id, or with readable the latest readable one) and
// the log offset of each bucket it holds every record below, where a union
// read continues from the log; LAKE_SNAPSHOT_NOT_EXIST (53) when there is
// none, as before the first tiering commit.
func (s *Server) getLakeSnapshot(ctx context.Context, _ int16, req *flusspb.GetLakeSnapshotRequest) (proto.Message, error) {
	n := s.cfg.Lake
	if req.GetReadable() && req.SnapshotId != nil {
		return nil, &Error{protocol.UnknownServerError, "GET_LAKE_SNAPSHOT: snapshot_id and readable=true cannot both be set; use one or the other"}
	}
	p := req.GetTablePath()
	t, err := n.Table(ctx, p.GetDatabaseName(), p.GetTableName())
	if err != nil {
		return nil, err
	}
	id := t.Registration.TableID
	l, err := n.LakeTable(ctx, id)
	if err != nil {
		return nil, err
	}
	var snap catalog.LakeSnapshot
	var ok bool
	what := "snapshot"
	offsets := func() catalog.LakeOffsets { return snap.Tiered }
	switch {
	case req.GetReadable():
		what = "readable snapshot"
		snap, ok = l.LatestReadable()
		offsets = func() catalog.LakeOffsets { return *snap.Readable }
	case req.SnapshotId != nil:
		snap, ok = l.Snapshot(req.GetSnapshotId())
	default:
		snap, ok = l.Latest()
	}
	if !ok {
		msg := fmt.Sprintf("Lake table %s doesn't exist for table: %s.%s, table id: %d", what, t.Database, t.Name, id)
		if req.SnapshotId != nil {
			msg += fmt.Sprintf(", snapshot id: %d", req.GetSnapshotId())
		}
		return nil, &Error{protocol.LakeSnapshotNotExist, msg}
	}
	resp := &flusspb.GetLakeSnapshotResponse{TableId: proto.Int64(id), SnapshotId: proto.Int64(snap.ID)}
	o := offsets().Offsets
	buckets := make([]int32, 0, len(o))
	for b := range o {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets)
	for _, b := range buckets {
		resp.BucketSnapshots = append(resp.BucketSnapshots, &flusspb.PbLakeSnapshotForBucket{BucketId: proto.Int32(b), LogOffset: proto.Int64(o[b])})
	}
	return resp, nil
}
