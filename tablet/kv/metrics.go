package kv

import "github.com/cockroachdb/pebble/v2"

// PebbleMetrics returns the tablet's Pebble metrics (disk use, memtables,
// levels, compactions), for /metrics; ErrClosed once the tablet is closed.
// It takes the read lock, as reads do, so it never waits for writes.
func (t *Tablet) PebbleMetrics() (*pebble.Metrics, error) {
	t.readMu.RLock()
	defer t.readMu.RUnlock()
	if t.isClosed() {
		return nil, ErrClosed
	}
	return t.db.Metrics(), nil
}
