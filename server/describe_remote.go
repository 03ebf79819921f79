package server

import (
	"strom/raftmeta/catalog"
	stromv1 "strom/rpc/gen/strom/v1"
)

// fillRemoteState adds to a bucket's description what its metadata says of
// remote storage: the tiered log's offsets and bytes, and the retained KV
// snapshots (issue 14's visibility).
func fillRemoteState(res *stromv1.BucketState, cat *catalog.Catalog, tableID int64) error {
	res.RemoteLogStartOffset, res.RemoteLogEndOffset = -1, -1
	man, err := cat.RemoteLogs(tableID, res.Bucket)
	if err != nil {
		return err
	}
	if len(man.Segments) > 0 {
		res.RemoteLogStartOffset, res.RemoteLogEndOffset = man.StartOffset(), man.EndOffset()
	}
	for _, s := range man.Segments {
		res.RemoteLogBytes += s.SizeBytes
	}
	snaps, err := cat.KvSnapshots(tableID, res.Bucket)
	if err != nil {
		return err
	}
	for _, s := range snaps.Snapshots {
		res.KvSnapshots = append(res.KvSnapshots, &stromv1.KvSnapshotInfo{
			Id: s.ID, LogOffset: s.LogOffset, CreatedTimeMs: s.CreatedAt, Files: int32(len(s.Files)), SizeBytes: s.Size(),
			Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
		})
	}
	return nil
}
