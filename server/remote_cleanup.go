package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"strom/raftmeta/catalog"
	"strom/remote"
)

// droppedRemoteGrace is how long after a drop the cleaner keeps looking
// for a dropped table's remote objects: a tiering or snapshot round that
// was putting objects when the table was dropped may still finish its
// puts (its commit then fails); once a pass after the grace finds the
// prefixes empty, the table's catalog.RemoteDeletion is removed.
const droppedRemoteGrace = 10 * time.Minute

// CleanDroppedRemote deletes the remote objects of dropped tables
// (catalog.RemoteDeletion: their tiered log segments and KV snapshots,
// and a file store's temporary files under them), as Fluss's coordinator
// does on a drop. It runs on the coordinator, every remote task interval;
// now judges droppedRemoteGrace. Each table's record is removed only after
// a pass at least droppedRemoteGrace after its drop found nothing left, so
// a crash or an error anywhere leaves it for the next pass (deleting is
// idempotent). It returns the first error of each table, joined.
func (s *Server) CleanDroppedRemote(ctx context.Context, now time.Time) error {
	if s.remote == nil {
		return nil
	}
	pending, err := s.cat.RemoteDeletions()
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range pending {
		n, err := deletePrefixes(ctx, s.remote, catalog.RemoteLogPrefix(d.Database, d.Table, d.TableID), catalog.RemoteKVPrefix(d.Database, d.Table, d.TableID))
		if n > 0 {
			s.lg.Info("deleted remote objects of a dropped table", "table", d.Database+"."+d.Table, "table_id", d.TableID, "objects", n)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete the remote objects of dropped table %s.%s (id %d): %w", d.Database, d.Table, d.TableID, err))
			continue
		}
		if n > 0 || now.UnixMilli()-d.DroppedAt < droppedRemoteGrace.Milliseconds() {
			continue // look again next pass
		}
		if err := s.coord.RemoteDeletionDone(ctx, d.TableID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deletePrefixes deletes every object under each prefix, and a file
// store's temporary files there (no put is in progress under a dropped
// table's prefix but a late one, which the grace covers), and returns how
// many objects it deleted.
func deletePrefixes(ctx context.Context, st remote.Store, prefixes ...string) (int, error) {
	n := 0
	for _, prefix := range prefixes {
		if ts, ok := st.(remote.TemporarySweeper); ok {
			k, err := ts.RemoveTemporary(ctx, prefix)
			n += k
			if err != nil {
				return n, err
			}
		}
		var keys []string
		for obj, err := range st.List(ctx, prefix) {
			if err != nil {
				return n, err
			}
			keys = append(keys, obj.Key)
		}
		for _, k := range keys {
			if err := st.Delete(ctx, k); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// cleanDroppedRemote runs CleanDroppedRemote every interval while this node
// is the coordinator, until ctx is done.
func (s *Server) cleanDroppedRemote(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.IsCoordinator() {
			continue
		}
		if err := s.CleanDroppedRemote(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.lg.Warn("remote cleanup of dropped tables", "err", err)
		}
	}
}
