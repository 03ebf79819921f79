package kv

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"strom/record"
	"strom/tablet/log"
)

// testWriter is a slog destination writing through t.Log until the test ends.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelInfo
	if _, ok := t.(*testing.B); ok {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

// testSchema: id INT key, name STRING, v BIGINT, ver BIGINT, flag BOOLEAN.
func testSchema() record.Schema {
	return record.Schema{
		Columns: []record.Column{
			{Name: "id", Type: record.DataType{Root: record.Int}},
			{Name: "name", Type: record.DataType{Root: record.String, Nullable: true}},
			{Name: "v", Type: record.DataType{Root: record.BigInt, Nullable: true}},
			{Name: "ver", Type: record.DataType{Root: record.BigInt, Nullable: true}},
			{Name: "flag", Type: record.DataType{Root: record.Boolean, Nullable: true}},
		},
		PrimaryKey: []string{"id"},
	}
}

func testTable(t testing.TB, s record.Schema, props map[string]string) record.TableDescriptor {
	t.Helper()
	d, err := record.TableDescriptor{Schema: s, Properties: props}.Normalize(1)
	if err != nil {
		t.Fatalf("normalize: %v", err)
	}
	return d
}

// tb is what the fixture needs of a test: *testing.T, *testing.B and
// *rapid.T all have it.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Log(args ...any)
}

// fixture is a log tablet and a KV tablet over it, in one directory.
type fixture struct {
	t    tb
	dir  string
	cfg  Config
	log  *log.Tablet
	kv   *Tablet
	rows *record.CompactedRowCodec
	keys *record.KeyCodec
}

func newFixture(t testing.TB, d record.TableDescriptor, mod func(*Config)) *fixture {
	t.Helper()
	f := newFixtureIn(t, t.TempDir(), testLogger(t), d, mod)
	t.Cleanup(f.close)
	return f
}

// newFixtureIn opens a fixture in dir; the caller closes it.
func newFixtureIn(t tb, dir string, lg *slog.Logger, d record.TableDescriptor, mod func(*Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: dir}
	f.cfg = Config{Dir: filepath.Join(dir, "kv"), Table: d, SchemaID: 1, Logger: lg}
	if mod != nil {
		mod(&f.cfg)
	}
	var err error
	if f.rows, err = record.NewCompactedRowCodec(d.Schema.Columns); err != nil {
		t.Fatal(err)
	}
	if f.keys, err = record.NewKeyCodec(d.Schema.Columns, d.Schema.PrimaryKey); err != nil {
		t.Fatal(err)
	}
	f.open()
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	lc := log.DefaultConfig()
	lc.Dir = filepath.Join(f.dir, "log")
	lc.NoSync = true
	lc.SegmentBytes = 1 << 20
	lc.Logger = f.cfg.Logger
	l, err := log.Open(lc)
	if err != nil {
		f.t.Fatalf("open log: %v", err)
	}
	f.log = l
	f.cfg.Log = l
	kv, err := Open(f.cfg)
	if err != nil {
		l.Close()
		f.t.Fatalf("open kv: %v", err)
	}
	f.kv = kv
}

func (f *fixture) close() {
	if f.kv != nil {
		if err := f.kv.Close(); err != nil {
			f.t.Errorf("close kv: %v", err)
		}
		f.kv = nil
	}
	if f.log != nil {
		if err := f.log.Close(); err != nil {
			f.t.Errorf("close log: %v", err)
		}
		f.log = nil
	}
}

func (f *fixture) reopen() {
	f.close()
	f.open()
}

// op is one write of a test batch: a row to upsert, or a key row (only the
// key columns set) to delete.
type op struct {
	row    record.Row
	delete bool
}

func up(vals ...any) op  { return op{row: record.Row(vals)} }
func del(vals ...any) op { return op{row: record.Row(vals), delete: true} }

func (f *fixture) batch(ops ...op) record.KvBatch {
	return f.batchW(record.NoWriterID, record.NoBatchSequence, ops...)
}

func (f *fixture) batchW(writer int64, seq int32, ops ...op) record.KvBatch {
	f.t.Helper()
	b := record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: 1, WriterID: writer, BatchSequence: seq})
	for _, o := range ops {
		key, err := f.keys.AppendRow(nil, o.row)
		if err != nil {
			f.t.Fatalf("key of %v: %v", o.row, err)
		}
		var row []byte
		if !o.delete {
			if row, err = f.rows.Append(nil, o.row); err != nil {
				f.t.Fatalf("row %v: %v", o.row, err)
			}
		}
		if err := b.Append(key, row); err != nil {
			f.t.Fatal(err)
		}
	}
	return b.Build()
}

// put writes ops and commits them: high watermark to the log end, flush.
func (f *fixture) put(target []int, ops ...op) log.AppendInfo {
	f.t.Helper()
	info, err := f.kv.PutKv(context.Background(), f.batch(ops...), target)
	if err != nil {
		f.t.Fatalf("PutKv: %v", err)
	}
	f.commit()
	return info
}

func (f *fixture) commit() {
	f.t.Helper()
	hw := f.log.SetHighWatermark(f.log.LogEndOffset())
	if err := f.kv.FlushTo(hw); err != nil {
		f.t.Fatalf("FlushTo: %v", err)
	}
}

// changelog returns the change types and rows of the log in [from, to).
func (f *fixture) changelog(from, to int64) ([]record.ChangeType, []record.Row) {
	f.t.Helper()
	var cts []record.ChangeType
	var rows []record.Row
	for off := from; off < to; {
		info, err := f.log.Read(off, 1<<20, to)
		if err != nil {
			f.t.Fatalf("read log at %d: %v", off, err)
		}
		if info.Batches == nil {
			break
		}
		for rest := info.Batches; len(rest) > 0; {
			b, r, err := record.NextBatch(rest)
			if err != nil {
				f.t.Fatal(err)
			}
			rest = r
			off = b.NextOffset()
			if b.RecordCount() == 0 {
				continue
			}
			ab, err := record.DecodeArrowBatch(b, f.cfg.Table.Schema, nil)
			if err != nil {
				f.t.Fatal(err)
			}
			for i := range ab.Len() {
				if o := b.BaseOffset() + int64(i); o >= from && o < to {
					cts = append(cts, ab.ChangeType(i))
					rows = append(rows, ab.Row(i))
				}
			}
			ab.Release()
		}
	}
	return cts, rows
}

// fold replays the changelog below `to` into key → KV value.
func (f *fixture) fold(to int64) map[string][]byte {
	f.t.Helper()
	cts, rows := f.changelog(0, to)
	m := map[string][]byte{}
	for i, ct := range cts {
		key, err := f.keys.AppendRow(nil, rows[i])
		if err != nil {
			f.t.Fatal(err)
		}
		switch ct {
		case record.Insert, record.UpdateAfter:
			v, err := f.rows.AppendKvValue(nil, 1, rows[i])
			if err != nil {
				f.t.Fatal(err)
			}
			m[string(key)] = v
		case record.Delete:
			delete(m, string(key))
		}
	}
	return m
}

// scanAll reads every row through a paged snapshot.
func (f *fixture) scanAll() map[string][]byte {
	f.t.Helper()
	s, err := f.kv.Snapshot()
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	m := map[string][]byte{}
	for {
		page, err := s.Next(3, 1<<10)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(page) == 0 {
			return m
		}
		for _, kv := range page {
			if _, dup := m[string(kv.Key)]; dup {
				f.t.Fatalf("scan returned key %x twice", kv.Key)
			}
			m[string(kv.Key)] = kv.Value
		}
	}
}

// checkInvariant checks DESIGN.md §8 invariant 4: the fold of the changelog
// below the high watermark equals a full scan, and every lookup agrees.
func (f *fixture) checkInvariant() {
	f.t.Helper()
	hw := f.log.HighWatermark()
	want := f.fold(hw)
	got := f.scanAll()
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			f.t.Fatalf("key %x: scan %x, changelog fold %x (hw %d)", k, got[k], v, hw)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			f.t.Fatalf("key %x: in the scan, not in the changelog fold (hw %d)", k, hw)
		}
	}
	keys := make([][]byte, 0, len(want)+1)
	for k := range want {
		keys = append(keys, []byte(k))
	}
	keys = append(keys, []byte{0x7f, 0x7f, 0x7f}) // absent
	vals, err := f.kv.Lookup(keys)
	if err != nil {
		f.t.Fatal(err)
	}
	for i, k := range keys {
		if !bytes.Equal(vals[i], want[string(k)]) {
			f.t.Fatalf("lookup %x = %x, want %x", k, vals[i], want[string(k)])
		}
	}
	if f.log.LogStartOffset() == 0 {
		if err := f.kv.VerifyFold(); err != nil {
			f.t.Fatalf("VerifyFold: %v", err)
		}
	}
	all, err := f.kv.LimitScan(math.MaxInt32)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(all) != len(want) {
		f.t.Fatalf("LimitScan returned %d rows, want %d", len(all), len(want))
	}
}

// lookupRow returns the decoded row under the key of keyRow, nil if absent.
func (f *fixture) lookupRow(keyVals ...any) record.Row {
	f.t.Helper()
	key, err := f.keys.Append(nil, record.Row(keyVals))
	if err != nil {
		f.t.Fatal(err)
	}
	vals, err := f.kv.Lookup([][]byte{key})
	if err != nil {
		f.t.Fatal(err)
	}
	if vals[0] == nil {
		return nil
	}
	_, rb, err := record.ParseKvValue(vals[0])
	if err != nil {
		f.t.Fatal(err)
	}
	row, err := f.rows.Decode(rb)
	if err != nil {
		f.t.Fatal(err)
	}
	return row
}

// changeString renders change types and rows compactly: "+I[1 a]".
func changeString(cts []record.ChangeType, rows []record.Row) []string {
	out := make([]string, len(cts))
	for i := range cts {
		parts := make([]string, len(rows[i]))
		for j, v := range rows[i] {
			parts[j] = valueString(v)
		}
		out[i] = cts[i].String() + "[" + strings.Join(parts, " ") + "]"
	}
	return out
}

func valueString(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(v)
}
