package kv

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"strom/record"
	"strom/tablet/log"
)

// Config configures a Tablet. Dir, Log, Table and SchemaID are required.
type Config struct {
	// Dir is the directory of the bucket's Pebble database; Open creates it
	// if missing. Nothing else may write into it. Required.
	Dir string
	// FS is the file system of the Pebble database (pebble.Options.FS); nil
	// means vfs.Default. The node's log tablets use the same one.
	FS vfs.FS
	// Log is the bucket's log tablet, already opened (and so recovered): the
	// KV's write-ahead log, which its changelog batches are appended to.
	// The caller owns it; Tablet.Close does not close it. Required.
	Log *log.Tablet
	// Table is the table's normalized descriptor (record.TableDescriptor.
	// Normalize): its schema must have a primary key. Its options choose the
	// merge engine (table.merge-engine, table.merge-engine.versioned.ver-column),
	// table.delete.behavior, table.changelog.image and the changelog's Arrow
	// compression (table.log.arrow.compression.*). Required.
	Table record.TableDescriptor
	// SchemaID is the id of Table.Schema: the one PutKv batches must carry
	// and the one written in front of every stored value. Required (≥ 0).
	SchemaID int16
	// Aggregations maps a non-key column name to its aggregate function for
	// the aggregation merge engine: sum, product, max, min, last_value,
	// last_value_ignore_nulls, first_value, first_value_ignore_nulls,
	// listagg, bool_and, bool_or. Columns not named use
	// last_value_ignore_nulls, as in Fluss. Fluss takes these from the table
	// options fields.<col>.agg; record's option validation does not accept
	// those keys yet, so until it does the server passes them here.
	Aggregations map[string]string
	// ListaggDelimiters maps a listagg column to its delimiter (Fluss
	// fields.<col>.listagg.delimiter); "," when not given.
	ListaggDelimiters map[string]string
	// Cache is the Pebble block cache. Share one per node; nil gives this
	// database a private 8 MiB cache. Pebble takes its own reference, so
	// the creator may Unref it once every tablet is open.
	Cache *pebble.Cache
	// MemTableSize is the size in bytes of Pebble's memtable; 0 means
	// DefaultMemTableSize (Fluss's kv.rocksdb.writebuffer.size, 64 MiB).
	MemTableSize uint64
	// DisableWAL turns off Pebble's own write-ahead log. The changelog is
	// the KV's real WAL: rows lost from Pebble's memtable in a crash are
	// replayed from the log on Open, as Fluss does with RocksDB. It is
	// faster, but the log must then keep every batch above the offset Pebble
	// has durably flushed (retention must not outrun Pebble's flushes).
	DisableWAL bool
	// Logger receives recovery reports. Nil discards them.
	Logger *slog.Logger
	// Now is the clock giving changelog batches their commit time. Nil
	// means time.Now.
	Now func() time.Time
}

// DefaultMemTableSize is Fluss's kv.rocksdb.writebuffer.size.
const DefaultMemTableSize = 64 << 20

// Validate reports every problem with c at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("kv: Config.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Dir == "" {
		bad("Dir", "must be set")
	}
	if c.Log == nil {
		bad("Log", "must be set")
	}
	if !c.Table.HasPrimaryKey() {
		bad("Table", "a KV tablet needs a primary-key table")
	}
	if c.SchemaID < 0 {
		bad("SchemaID", "%d is negative", c.SchemaID)
	}
	if c.Table.HasPrimaryKey() {
		if _, err := newEngine(c); err != nil {
			errs = append(errs, err)
		}
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

// option returns a table option's value, upper-cased for enums.
func (c Config) option(key string) string {
	v, _ := c.Table.Option(key)
	return strings.ToUpper(strings.TrimSpace(v))
}
