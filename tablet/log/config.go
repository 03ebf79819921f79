package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Config configures a Tablet. Start from DefaultConfig and set Dir.
type Config struct {
	// Dir is the tablet's own directory (one bucket replica); Open creates
	// it if missing. Nothing else may write into it. Required.
	Dir string
	// FS is the file system every file of the tablet lives on; nil means
	// vfs.Default (the operating system's). Tests pass an in-memory one
	// that can drop unsynced writes (internal/strictfs). Its files must
	// support Truncate(size int64) error, as vfs.Default's do.
	FS vfs.FS
	// SegmentBytes is the size in bytes at which the active segment is
	// rolled: an append that would take it past this size goes into a new
	// segment (Fluss log.segment.file-size, default 1 GiB; 1 byte to
	// math.MaxInt32). A single batch larger than this is rejected with
	// ErrRecordTooLarge.
	SegmentBytes int64
	// SegmentAge rolls the active segment once the first batch appended to
	// it is this much older (by commit timestamp) than the batch being
	// appended (Kafka's segment.ms). 0 never rolls by age.
	SegmentAge time.Duration
	// IndexIntervalBytes is the number of log bytes between two entries of
	// the sparse offset index (Fluss log.index.interval-size, default 4096;
	// 0 indexes every batch). A read or a recovery of the batch containing
	// an offset scans at most about this many bytes of headers.
	IndexIntervalBytes int
	// IndexFileBytes is the largest size in bytes of one segment's offset
	// index (8-byte entries) or time index (12-byte entries); the segment
	// is rolled before either would exceed it (Fluss log.index.file-size,
	// default 10 MiB; at least 12).
	IndexFileBytes int
	// WriterExpiration is how long after its last batch an idempotent
	// writer's state is kept; RemoveExpiredWriters drops older ones (Fluss
	// server.writer-id.expiration-time, default 7 days; 0 keeps writers
	// forever).
	WriterExpiration time.Duration
	// FlushMessages is the flush policy by count: the log fsyncs once this
	// many messages (records, i.e. offsets) have been appended since the
	// last fsync (Kafka's and Fluss's log.flush.interval-messages; default
	// math.MaxInt64, never; at least 1). See FlushInterval.
	FlushMessages int64
	// FlushInterval is the flush policy by time: the log fsyncs data that
	// is this old since the last fsync (log.flush.interval-ms; 0, the
	// default, never). With either policy set the high watermark never
	// passes data that is not fsynced (SetHighWatermark stops at
	// FlushedOffset), so what is committed survives a power cut. Without
	// one, appends reach the disk when the kernel writes them back or the
	// segment rolls; replication is what protects them (Kafka's and
	// Fluss's default).
	FlushInterval time.Duration
	// OnFlush, if set, is called after FlushedOffset advanced, by the
	// goroutine that fsynced, holding no lock of the tablet (the replica
	// layer moves its high watermark there). It must not wait for the
	// tablet's appends or Close.
	OnFlush func()
	// SyncFile fsyncs a file of log data (segments and their indexes); nil
	// means f.Sync. path names the file. A seam for tests that delay or fail
	// fsyncs.
	SyncFile func(path string, f vfs.File) error
	// NoSync skips every fsync (segment rolls, checkpoints, directory
	// updates, Flush). The log still survives a killed process intact, but
	// not a power cut. For tests and benchmarks.
	NoSync bool
	// Logger receives recovery reports and warnings. Nil discards them.
	Logger *slog.Logger
	// Now is the clock of RemoveExpiredWriters (the append and retention
	// methods take the time as an argument). Nil means time.Now.
	Now func() time.Time
}

// DefaultConfig returns Fluss's defaults. Dir must still be set.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		IndexIntervalBytes: 4096,
		IndexFileBytes:     10 << 20,
		WriterExpiration:   7 * 24 * time.Hour,
		FlushMessages:      math.MaxInt64,
	}
}

// Validate reports every problem with c at once, each naming its field and,
// where Fluss has one, its configuration key.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("log: Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Dir == "" {
		bad("Dir", "must be set")
	}
	if c.SegmentBytes < 1 || c.SegmentBytes > math.MaxInt32 {
		bad("SegmentBytes", "(log.segment.file-size) %d is outside 1..%d bytes", c.SegmentBytes, math.MaxInt32)
	}
	if c.SegmentAge < 0 {
		bad("SegmentAge", "%s is negative (0 disables rolling by age)", c.SegmentAge)
	}
	if c.IndexIntervalBytes < 0 {
		bad("IndexIntervalBytes", "(log.index.interval-size) %d is negative", c.IndexIntervalBytes)
	}
	if c.WriterExpiration < 0 {
		bad("WriterExpiration", "(server.writer-id.expiration-time) %s is negative (0 keeps writers forever)", c.WriterExpiration)
	}
	if c.FlushMessages < 1 {
		bad("FlushMessages", "(log.flush.interval-messages) %d is below 1 (%d never flushes by count)", c.FlushMessages, int64(math.MaxInt64))
	}
	if c.FlushInterval < 0 {
		bad("FlushInterval", "(log.flush.interval-ms) %s is negative (0 never flushes by time)", c.FlushInterval)
	}
	if c.IndexFileBytes < timeEntrySize {
		bad("IndexFileBytes", "(log.index.file-size) %d is below %d bytes (one time index entry)", c.IndexFileBytes, timeEntrySize)
	}
	return errors.Join(errs...)
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (c Config) fs() vfs.FS {
	if c.FS != nil {
		return c.FS
	}
	return vfs.Default
}

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// flushPolicy reports whether the high watermark waits for fsyncs.
func (c Config) flushPolicy() bool {
	return c.FlushMessages < math.MaxInt64 || c.FlushInterval > 0
}

// maxIndexEntries is the most entries either index of a segment may hold.
func (c Config) maxIndexEntries() int {
	return min(c.IndexFileBytes/offsetEntrySize, c.IndexFileBytes/timeEntrySize)
}
