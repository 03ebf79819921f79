package kv

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"strom/record"
)

// step is one PutKv of a scenario and the changelog it must produce.
type step struct {
	target []int
	ops    []op
	want   []string // changelog rows of this PutKv
}

func runSteps(t *testing.T, f *fixture, steps []step) {
	t.Helper()
	for i, s := range steps {
		info := f.put(s.target, s.ops...)
		cts, rows := f.changelog(info.FirstOffset, info.LastOffset+1)
		got := changeString(cts, rows)
		if !slices.Equal(got, s.want) && !(len(got) == 0 && len(s.want) == 0) {
			t.Fatalf("step %d: changelog %v, want %v", i, got, s.want)
		}
		f.checkInvariant()
	}
}

func TestMergeEngines(t *testing.T) {
	s := testSchema()
	cases := []struct {
		name  string
		props map[string]string
		aggs  map[string]string
		steps []step
	}{
		{"default full image", nil, nil, []step{
			{ops: []op{up(int32(1), "a", int64(10), nil, nil)}, want: []string{"+I[1 a 10 null null]"}},
			{ops: []op{up(int32(1), "b", int64(11), nil, nil)}, want: []string{"-U[1 a 10 null null]", "+U[1 b 11 null null]"}},
			{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: []string{"-D[1 b 11 null null]"}},
			{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: nil}, // absent: no-op
			{ops: []op{up(int32(2), "x", nil, nil, nil), up(int32(2), "y", nil, nil, nil), del(int32(2), nil, nil, nil, nil)},
				want: []string{"+I[2 x null null null]", "-U[2 x null null null]", "+U[2 y null null null]", "-D[2 y null null null]"}},
		}},
		{"default wal image", map[string]string{record.OptChangelogImage: "WAL"}, nil, []step{
			{ops: []op{up(int32(1), "a", int64(10), nil, nil)}, want: []string{"+U[1 a 10 null null]"}},
			{ops: []op{up(int32(1), "b", int64(11), nil, nil)}, want: []string{"+U[1 b 11 null null]"}},
			{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: []string{"-D[1 b 11 null null]"}},
			{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: nil},
		}},
		{"wal image partial update", map[string]string{record.OptChangelogImage: "WAL"}, nil, []step{
			{target: []int{0, 1}, ops: []op{up(int32(1), "a", nil, nil, nil)}, want: []string{"+I[1 a null null null]"}},
			{target: []int{0, 2}, ops: []op{up(int32(1), nil, int64(5), nil, nil)}, want: []string{"+U[1 a 5 null null]"}},
		}},
		{"first_row", map[string]string{record.OptMergeEngine: "first_row"}, nil, []step{
			{ops: []op{up(int32(1), "a", int64(10), nil, nil)}, want: []string{"+I[1 a 10 null null]"}},
			{ops: []op{up(int32(1), "b", int64(11), nil, nil)}, want: nil},
			{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: nil}, // deletes ignored by default
		}},
		{"versioned", map[string]string{record.OptMergeEngine: "versioned", record.OptMergeEngineVersionColumn: "ver"}, nil, []step{
			{ops: []op{up(int32(1), "a", nil, int64(5), nil)}, want: []string{"+I[1 a null 5 null]"}},
			{ops: []op{up(int32(1), "old", nil, int64(4), nil)}, want: nil},
			{ops: []op{up(int32(1), "null", nil, nil, nil)}, want: nil},
			{ops: []op{up(int32(1), "same", nil, int64(5), nil)}, want: []string{"-U[1 a null 5 null]", "+U[1 same null 5 null]"}},
			{ops: []op{up(int32(1), "new", nil, int64(9), nil)}, want: []string{"-U[1 same null 5 null]", "+U[1 new null 9 null]"}},
			{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: nil},
		}},
		{"aggregation", map[string]string{record.OptMergeEngine: "aggregation"},
			map[string]string{"name": "listagg", "v": "sum", "ver": "max", "flag": "bool_and"}, []step{
				{ops: []op{up(int32(1), "a", int64(10), int64(3), true)}, want: []string{"+I[1 a 10 3 true]"}},
				{ops: []op{up(int32(1), "b", int64(5), int64(2), false)}, want: []string{"-U[1 a 10 3 true]", "+U[1 a,b 15 3 false]"}},
				{ops: []op{up(int32(1), nil, nil, int64(7), nil)}, want: []string{"-U[1 a,b 15 3 false]", "+U[1 a,b 15 7 false]"}},
				{target: []int{0, 2}, ops: []op{up(int32(1), nil, int64(1), nil, nil)}, want: []string{"-U[1 a,b 15 7 false]", "+U[1 a,b 16 7 false]"}},
				{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: nil}, // ignored by default
			}},
		{"aggregation delete allowed", map[string]string{record.OptMergeEngine: "aggregation", record.OptDeleteBehavior: "ALLOW"},
			map[string]string{"v": "product"}, []step{
				{ops: []op{up(int32(1), "a", int64(3), nil, nil)}, want: []string{"+I[1 a 3 null null]"}},
				{ops: []op{up(int32(1), nil, int64(4), nil, nil)}, want: []string{"-U[1 a 3 null null]", "+U[1 a 12 null null]"}},
				{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: []string{"-D[1 a 12 null null]"}},
			}},
		{"partial update", nil, nil, []step{
			{target: []int{0, 1}, ops: []op{up(int32(1), "a", int64(99), nil, nil)}, want: []string{"+I[1 a null null null]"}},
			{target: []int{0, 2}, ops: []op{up(int32(1), nil, int64(7), nil, nil)}, want: []string{"-U[1 a null null null]", "+U[1 a 7 null null]"}},
			{target: []int{0, 1}, ops: []op{del(int32(1), nil, nil, nil, nil)}, want: []string{"-U[1 a 7 null null]", "+U[1 null 7 null null]"}},
			{target: []int{0, 2}, ops: []op{del(int32(1), nil, nil, nil, nil)}, want: []string{"-D[1 null 7 null null]"}},
		}},
		{"delete ignored", map[string]string{record.OptDeleteBehavior: "IGNORE"}, nil, []step{
			{ops: []op{up(int32(1), "a", nil, nil, nil)}, want: []string{"+I[1 a null null null]"}},
			{ops: []op{del(int32(1), nil, nil, nil, nil)}, want: nil},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testTable(t, s, tc.props), func(c *Config) { c.Aggregations = tc.aggs })
			runSteps(t, f, tc.steps)
			f.reopen()
			f.checkInvariant()
		})
	}
}

func TestAggregateFunctions(t *testing.T) {
	s := record.Schema{
		Columns:    []record.Column{{Name: "id", Type: record.DataType{Root: record.Int}}},
		PrimaryKey: []string{"id"},
	}
	fns := []string{"sum", "product", "max", "min", "last_value", "last_value_ignore_nulls",
		"first_value", "first_value_ignore_nulls"}
	aggs := map[string]string{}
	for _, fn := range fns {
		s.Columns = append(s.Columns, record.Column{Name: fn, Type: record.DataType{Root: record.BigInt, Nullable: true}})
		aggs[fn] = fn
	}
	s.Columns = append(s.Columns,
		record.Column{Name: "listagg", Type: record.DataType{Root: record.String, Nullable: true}},
		record.Column{Name: "bool_and", Type: record.DataType{Root: record.Boolean, Nullable: true}},
		record.Column{Name: "bool_or", Type: record.DataType{Root: record.Boolean, Nullable: true}},
		record.Column{Name: "dec", Type: record.DataType{Root: record.Decimal, Precision: 10, Scale: 2, Nullable: true}},
	)
	aggs["listagg"], aggs["bool_and"], aggs["bool_or"], aggs["dec"] = "listagg", "bool_and", "bool_or", "sum"
	f := newFixture(t, testTable(t, s, map[string]string{record.OptMergeEngine: "aggregation"}), func(c *Config) {
		c.Aggregations = aggs
		c.ListaggDelimiters = map[string]string{"listagg": "|"}
	})
	dec := func(u int64) record.DecimalValue {
		d, err := record.DecimalFromInt64(u, 10, 2)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	i64 := func(v int64) any { return v }
	rows := []record.Row{
		{int32(1), i64(2), i64(2), i64(2), i64(2), i64(2), i64(2), i64(2), i64(2), "a", true, false, dec(150)},
		{int32(1), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
		{int32(1), i64(5), i64(5), i64(5), i64(5), i64(5), i64(5), i64(5), i64(5), "b", false, true, dec(275)},
		{int32(1), i64(-1), i64(3), i64(1), i64(-4), i64(8), nil, i64(9), i64(9), "c", true, false, dec(1)},
	}
	for _, r := range rows {
		f.put(nil, up(r...))
	}
	got := f.lookupRow(int32(1))
	// first_value keeps the first value, but the second write's NULL is the
	// last_value; first_value_ignore_nulls keeps 2.
	want := record.Row{int32(1), i64(6), i64(30), i64(5), i64(-4), i64(8), i64(5), i64(2), i64(2), "a|b|c", false, true, dec(426)}
	if !got.Equal(want) {
		t.Fatalf("aggregated row %v, want %v", got, want)
	}
	f.checkInvariant()
}

func TestBadInput(t *testing.T) {
	s := testSchema()
	s.Columns[4].Type.Nullable = false // flag BOOLEAN NOT NULL
	f := newFixture(t, testTable(t, s, map[string]string{record.OptDeleteBehavior: "DISABLE"}), nil)
	ctx := context.Background()
	good := f.rowBytes(record.Row{int32(1), "a", nil, nil, true})
	key1, _ := f.keys.Append(nil, record.Row{int32(1)})
	key2, _ := f.keys.Append(nil, record.Row{int32(2)})
	build := func(recs ...[2][]byte) record.KvBatch {
		b := record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: 1, WriterID: record.NoWriterID, BatchSequence: record.NoBatchSequence})
		for _, r := range recs {
			if err := b.Append(r[0], r[1]); err != nil {
				t.Fatal(err)
			}
		}
		return b.Build()
	}
	nullFlag := slices.Clone(good)
	nullFlag[0] |= 1 << 4 // flag NULL, its byte dropped
	nullFlag = nullFlag[:len(nullFlag)-1]
	cases := []struct {
		name   string
		batch  record.KvBatch
		target []int
		want   error
		index  int
		column string
	}{
		{"null in not null", build([2][]byte{key1, good}, [2][]byte{key1, nullFlag}), nil, ErrInvalidRecord, 1, ""},
		{"key mismatch", build([2][]byte{key2, good}), nil, ErrInvalidRecord, 0, ""},
		{"truncated row", build([2][]byte{key1, good[:2]}), nil, ErrInvalidRecord, 0, ""},
		{"bad key", build([2][]byte{{0xff}, nil}), nil, ErrInvalidRecord, 0, ""},
		{"delete disabled", build([2][]byte{key1, good}, [2][]byte{key1, nil}), nil, ErrDeletionDisabled, 1, ""},
		{"partial without key", build([2][]byte{key1, good}), []int{1}, ErrPartialUpdateUnsupported, -1, ""},
		{"partial with NOT NULL column", build([2][]byte{key1, good}), []int{0, 1}, ErrPartialUpdateUnsupported, -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			end := f.log.LogEndOffset()
			_, err := f.kv.PutKv(ctx, tc.batch, tc.target)
			if !errors.Is(err, tc.want) {
				t.Fatalf("PutKv: %v, want %v", err, tc.want)
			}
			t.Log(err)
			var re *RecordError
			if tc.index >= 0 {
				if !errors.As(err, &re) || re.Index != tc.index {
					t.Fatalf("error %v does not name record %d", err, tc.index)
				}
			}
			if got := f.log.LogEndOffset(); got != end {
				t.Fatalf("log end moved from %d to %d: something was appended", end, got)
			}
		})
	}
	// A value of the wrong Go type is caught by CheckRow with the column.
	bad := record.Row{int32(1), "a", nil, nil, true}
	if err := f.cfg.Table.Schema.CheckRow(bad); err != nil {
		t.Fatal(err)
	}
	other := newFixture(t, testTable(t, testSchema(), nil), nil)
	if _, err := other.kv.PutKv(ctx, f.batchW(record.NoWriterID, record.NoBatchSequence, up(int32(1), "a", nil, nil, true)), nil); err != nil {
		t.Fatal(err)
	}
	wrongSchema := record.NewKvBatchBuilder(record.KvBatchHeader{SchemaID: 7, WriterID: -1, BatchSequence: -1})
	wrongSchema.Append(key1, good)
	if _, err := other.kv.PutKv(ctx, wrongSchema.Build(), nil); !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("wrong schema id: %v", err)
	}
}

func (f *fixture) rowBytes(r record.Row) []byte {
	f.t.Helper()
	b, err := f.rows.Append(nil, r)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func TestBadInputNamesColumn(t *testing.T) {
	// A string too long for CHAR(2) passes the row codec (which does not
	// check lengths, as in Fluss) and fails CheckRow, naming the column.
	s := record.Schema{Columns: []record.Column{
		{Name: "id", Type: record.DataType{Root: record.Int}},
		{Name: "c", Type: record.DataType{Root: record.Char, Length: 2, Nullable: true}},
	}, PrimaryKey: []string{"id"}}
	f := newFixture(t, testTable(t, s, nil), nil)
	_, err := f.kv.PutKv(context.Background(), f.batch(up(int32(1), "ok"), up(int32(2), "toolong")), nil)
	var re *RecordError
	if !errors.As(err, &re) || re.Index != 1 || re.Column != "c" {
		t.Fatalf("PutKv: %v; want a RecordError for record 1, column c", err)
	}
	if f.log.LogEndOffset() != 0 {
		t.Fatal("something was appended")
	}
}

func TestPreWriteBufferHidesUncommitted(t *testing.T) {
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	ctx := context.Background()
	f.put(nil, up(int32(1), "a", nil, nil, nil))
	// Uncommitted: the leader's next write sees it, lookups do not.
	if _, err := f.kv.PutKv(ctx, f.batch(up(int32(1), "b", nil, nil, nil)), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.lookupRow(int32(1)); got[1] != "a" {
		t.Fatalf("lookup sees uncommitted row %v", got)
	}
	info, err := f.kv.PutKv(ctx, f.batch(up(int32(1), "c", nil, nil, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cts, rows := f.changelog(info.FirstOffset, info.LastOffset+1)
	if got := changeString(cts, rows); !slices.Equal(got, []string{"-U[1 b null null null]", "+U[1 c null null null]"}) {
		t.Fatalf("changelog %v: the merge did not read the pre-write buffer", got)
	}
	if st := f.kv.Stats(); st.BufferedEntries != 2 {
		t.Fatalf("stats %+v, want 2 buffered", st)
	}
	// Commit the first of the two: HW mid-way.
	if err := f.kv.FlushTo(info.FirstOffset); err != nil {
		t.Fatal(err)
	}
	f.log.SetHighWatermark(info.FirstOffset)
	if got := f.lookupRow(int32(1)); got[1] != "b" {
		t.Fatalf("after flushing to %d: %v", info.FirstOffset, got)
	}
	f.checkInvariant()
	// A restart replays the uncommitted tail into the buffer again.
	f.reopen()
	f.checkInvariant()
	if st := f.kv.Stats(); st.BufferedEntries != 1 {
		t.Fatalf("after reopen: %+v, want 1 buffered", st)
	}
	// Truncating the log drops it: the leader's next write sees b.
	if err := f.log.TruncateTo(info.FirstOffset); err != nil {
		t.Fatal(err)
	}
	if err := f.kv.TruncateTo(info.FirstOffset); err != nil {
		t.Fatal(err)
	}
	info = f.put(nil, up(int32(1), "d", nil, nil, nil))
	cts, rows = f.changelog(info.FirstOffset, info.LastOffset+1)
	if got := changeString(cts, rows); !slices.Equal(got, []string{"-U[1 b null null null]", "+U[1 d null null null]"}) {
		t.Fatalf("changelog after truncation %v", got)
	}
	f.checkInvariant()
}

func TestIdempotentRetry(t *testing.T) {
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	ctx := context.Background()
	b := f.batchW(7, 0, up(int32(1), "a", nil, nil, nil))
	first, err := f.kv.PutKv(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.kv.PutKv(ctx, f.batchW(7, 0, up(int32(1), "a", nil, nil, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.FirstOffset != first.FirstOffset {
		t.Fatalf("retry: %+v, first %+v", again, first)
	}
	// A batch whose records are all no-ops still records the sequence.
	if _, err := f.kv.PutKv(ctx, f.batchW(7, 1, del(int32(5), nil, nil, nil, nil)), nil); err != nil {
		t.Fatal(err)
	}
	f.commit()
	f.checkInvariant()
}

func TestFollowerApply(t *testing.T) {
	d := testTable(t, testSchema(), nil)
	leader := newFixture(t, d, nil)
	follower := newFixture(t, d, nil)
	ctx := context.Background()
	writes := [][]op{
		{up(int32(1), "a", nil, nil, nil), up(int32(2), "b", nil, nil, nil)},
		{up(int32(1), "a2", nil, nil, nil), del(int32(2), nil, nil, nil, nil)},
		{up(int32(3), "c", nil, nil, nil)},
	}
	for _, w := range writes {
		if _, err := leader.kv.PutKv(ctx, leader.batch(w...), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Replicate: read the leader's log, append as follower, apply.
	info, err := leader.log.Read(0, 1<<20, leader.log.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.log.AppendAsFollower(info.Batches); err != nil {
		t.Fatal(err)
	}
	// Appended but not yet applied: the KV refuses to lead.
	if _, err := follower.kv.PutKv(ctx, follower.batch(up(int32(8), "x", nil, nil, nil)), nil); !errors.Is(err, ErrBehindLog) {
		t.Fatalf("PutKv before ApplyChangelog: %v", err)
	}
	if err := follower.kv.ApplyChangelog(info.Batches); err != nil {
		t.Fatal(err)
	}
	if err := follower.kv.ApplyChangelog(info.Batches); err != nil { // repeated: skipped
		t.Fatal(err)
	}
	follower.commit()
	leader.commit()
	follower.checkInvariant()
	if got, want := follower.scanAll(), leader.scanAll(); len(got) != len(want) {
		t.Fatalf("follower has %d rows, leader %d", len(got), len(want))
	}
	// Promoted, the follower serves writes on top of what it applied.
	if err := follower.kv.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	info2 := follower.put(nil, up(int32(1), "a3", nil, nil, nil))
	cts, rows := follower.changelog(info2.FirstOffset, info2.LastOffset+1)
	if got := changeString(cts, rows); !slices.Equal(got, []string{"-U[1 a2 null null null]", "+U[1 a3 null null null]"}) {
		t.Fatalf("promoted follower's changelog %v", got)
	}
	follower.checkInvariant()
}

func TestPrefixLookupAndScans(t *testing.T) {
	s := record.Schema{Columns: []record.Column{
		{Name: "a", Type: record.DataType{Root: record.Int}},
		{Name: "b", Type: record.DataType{Root: record.String}},
		{Name: "v", Type: record.DataType{Root: record.Int, Nullable: true}},
	}, PrimaryKey: []string{"a", "b"}}
	f := newFixture(t, testTable(t, s, nil), nil)
	var ops []op
	for a := range int32(4) {
		for _, b := range []string{"x", "y", "z"} {
			ops = append(ops, up(a, b, a))
		}
	}
	f.put(nil, ops...)
	bucketKey, err := record.NewKeyCodec(s.Columns, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	for a := range int32(5) {
		p, err := bucketKey.Append(nil, record.Row{a})
		if err != nil {
			t.Fatal(err)
		}
		vals, more, err := f.kv.PrefixLookup(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := 3
		if a == 4 {
			want = 0
		}
		if len(vals) != want || more {
			t.Fatalf("prefix a=%d: %d rows (more %t), want %d", a, len(vals), more, want)
		}
		// A byte bound stops before the row that would pass it.
		if want > 0 {
			one := len(vals[0])
			if vals, more, err := f.kv.PrefixLookup(p, one); err != nil || len(vals) != 1 || !more {
				t.Fatalf("prefix a=%d within %d bytes: %d rows, more %t, %v; want 1 row and more", a, one, len(vals), more, err)
			}
		}
	}
	if vals, err := f.kv.LimitScan(5); err != nil || len(vals) != 5 {
		t.Fatalf("LimitScan(5): %d rows, %v", len(vals), err)
	}
	// A snapshot does not see later writes.
	snap, err := f.kv.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.put(nil, up(int32(9), "new", int32(9)))
	n := 0
	for {
		page, err := snap.Next(5, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		n += len(page)
	}
	if n != 12 {
		t.Fatalf("snapshot returned %d rows, want 12", n)
	}
	if snap.Offset() != 1*12 { // one batch of 12 rows before the snapshot
		t.Fatalf("snapshot offset %d", snap.Offset())
	}
	// Close the tablet with the snapshot still open: Close releases it.
	f.close()
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMetaKeyOutsideRows(t *testing.T) {
	// INT 0 and BOOLEAN false keys encode as 0x00: they must not collide
	// with the meta key, and scans must not return the meta key.
	f := newFixture(t, testTable(t, testSchema(), nil), nil)
	f.put(nil, up(int32(0), "zero", nil, nil, nil))
	if got := f.lookupRow(int32(0)); got == nil || got[1] != "zero" {
		t.Fatalf("row 0: %v", got)
	}
	vals, err := f.kv.Lookup([][]byte{{}})
	if err != nil || vals[0] != nil {
		t.Fatalf("lookup of the empty key: %x, %v", vals[0], err)
	}
	if all, _ := f.kv.LimitScan(10); len(all) != 1 {
		t.Fatalf("LimitScan: %d rows, want 1", len(all))
	}
	if off := f.kv.FlushedOffset(); off != 1 {
		t.Fatalf("flushed offset %d", off)
	}
}

func TestConfigValidate(t *testing.T) {
	d := testTable(t, testSchema(), map[string]string{record.OptMergeEngine: "aggregation"})
	err := Config{Table: d, Aggregations: map[string]string{"id": "sum", "name": "sum", "nope": "max", "v": "median"}}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Config.Dir", "Config.Log", `"id" is a primary-key column`, `sum does not apply to STRING`, `"nope" is not a column`, `"median" is not an aggregate function`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestFloatColumns(t *testing.T) {
	// With FLOAT or DOUBLE columns the stored value is re-encoded (NaNs are
	// canonicalized), so it equals the changelog's fold byte for byte.
	s := record.Schema{Columns: []record.Column{
		{Name: "id", Type: record.DataType{Root: record.Int}},
		{Name: "f", Type: record.DataType{Root: record.Float, Nullable: true}},
		{Name: "d", Type: record.DataType{Root: record.Double, Nullable: true}},
	}, PrimaryKey: []string{"id"}}
	f := newFixture(t, testTable(t, s, nil), nil)
	if f.kv.rawValues {
		t.Fatal("rawValues with FLOAT columns")
	}
	nan32 := math.Float32frombits(0x7fc00001)
	f.put(nil, up(int32(1), nan32, math.NaN()), up(int32(2), float32(math.Copysign(0, -1)), math.Inf(1)))
	f.put(nil, up(int32(1), float32(1.5), nil))
	f.checkInvariant()
	f.reopen()
	f.checkInvariant()
}

func TestRecoveryEdges(t *testing.T) {
	d := testTable(t, testSchema(), nil)
	t.Run("stale high watermark checkpoint", func(t *testing.T) {
		f := newFixture(t, d, nil)
		f.put(nil, up(int32(1), "a", nil, nil, nil))
		f.put(nil, up(int32(2), "b", nil, nil, nil))
		// The log's checkpoint lags what Pebble holds (a crash between the
		// flush and the checkpoint): Open raises the high watermark.
		f.log.SetHighWatermark(1)
		f.reopen()
		if hw := f.log.HighWatermark(); hw != 2 {
			t.Fatalf("high watermark %d after reopen, want 2", hw)
		}
		f.checkInvariant()
	})
	t.Run("log behind pebble", func(t *testing.T) {
		f := newFixture(t, d, nil)
		f.put(nil, up(int32(1), "a", nil, nil, nil))
		f.put(nil, up(int32(2), "b", nil, nil, nil))
		if err := f.kv.Close(); err != nil {
			t.Fatal(err)
		}
		f.kv = nil
		if err := f.log.TruncateTo(1); err != nil { // committed data lost
			t.Fatal(err)
		}
		// Pebble holds row 2, which the log lost: Open rebuilds the KV
		// from the log, as its fold.
		f.cfg.Log = f.log
		kv, err := Open(f.cfg)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		f.kv = kv
		f.checkInvariant()
		if got := f.lookupRow(int32(2)); got != nil {
			t.Fatalf("row 2 after the rebuild: %v", got)
		}
	})
	t.Run("canceled context", func(t *testing.T) {
		f := newFixture(t, d, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := f.kv.PutKv(ctx, f.batch(up(int32(1), "a", nil, nil, nil)), nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("PutKv: %v", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		f := newFixture(t, d, nil)
		f.kv.Close()
		if _, err := f.kv.Lookup([][]byte{{1}}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Lookup after Close: %v", err)
		}
		if _, err := f.kv.PutKv(context.Background(), f.batch(up(int32(1), "a", nil, nil, nil)), nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("PutKv after Close: %v", err)
		}
		if err := f.kv.FlushTo(5); !errors.Is(err, ErrClosed) {
			t.Fatalf("FlushTo after Close: %v", err)
		}
		if _, err := f.kv.Snapshot(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Snapshot after Close: %v", err)
		}
	})
}

// TestLookupValuesOwned: Lookup's values are the caller's: appending to
// one (they share one allocation) leaves the others as they were, and a
// later write to the tablet does not change them.
func TestLookupValuesOwned(t *testing.T) {
	s := record.Schema{Columns: []record.Column{
		{Name: "a", Type: record.DataType{Root: record.Int}},
		{Name: "v", Type: record.DataType{Root: record.String}},
	}, PrimaryKey: []string{"a"}}
	f := newFixture(t, testTable(t, s, nil), nil)
	f.put(nil, up(int32(1), "one"), up(int32(2), "two"), up(int32(3), "three"))
	var keys [][]byte
	for _, a := range []int32{1, 2, 3} {
		k, err := f.keys.AppendRow(nil, record.Row{a, nil})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	vals, err := f.kv.Lookup(keys)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, len(vals))
	for i, v := range vals {
		want[i] = bytes.Clone(v)
	}
	for i := range vals {
		vals[i] = append(vals[i], "overwrite"...)
	}
	f.put(nil, up(int32(2), "changed"))
	for i := range want {
		if got := vals[i][:len(want[i])]; !bytes.Equal(got, want[i]) {
			t.Fatalf("value %d after appends to the others and a write: %q, want %q", i, got, want[i])
		}
	}
}
