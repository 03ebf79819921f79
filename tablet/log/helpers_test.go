package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"strom/record"
)

// logCapture is a slog destination that writes through t.Log (until the
// test ends) and keeps the text for assertions.
type logCapture struct {
	t       testing.TB
	mu      sync.Mutex
	buf     bytes.Buffer
	stopped bool
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if !c.stopped {
		c.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// testLogger returns a logger writing through t.Log and its capture.
func testLogger(t testing.TB) (*slog.Logger, *logCapture) {
	c := &logCapture{t: t}
	t.Cleanup(func() { // registered first, runs last
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
	})
	level := slog.LevelInfo
	if _, ok := t.(*testing.B); ok {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: level})), c
}

// testConfig is a small-segment configuration in a fresh directory.
func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Dir = t.TempDir()
	cfg.NoSync = true
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 256
	cfg.Logger, _ = testLogger(t)
	// The tests' batches are committed around t0: writers expire by a
	// clock there, not by the wall clock.
	cfg.Now = fixedNow(t0.UnixMilli())
	return cfg
}

// openT opens a tablet that is closed when the test ends (unless the test
// closed or crashed it).
func openT(t testing.TB, cfg Config) *Tablet {
	t.Helper()
	tb, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

// crash abandons the tablet as a killed process would: files are closed
// and nothing is flushed, checkpointed or marked clean.
func (t *Tablet) crash() {
	t.stopFlusher()
	t.appendMu.Lock()
	defer t.appendMu.Unlock()
	t.mu.Lock()
	t.mu.closed = true
	segs := t.mu.segments
	t.mu.Unlock()
	for _, s := range segs {
		s.closeFiles()
	}
}

// payload is the deterministic records section of test batch id.
func payload(id int64, size int) []byte {
	p := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(id), 0x5eed))
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	if size >= 8 {
		binary.LittleEndian.PutUint64(p, uint64(id))
	}
	return p
}

// batchSpec describes a client batch to build.
type batchSpec struct {
	id      int64 // payload seed
	records int
	size    int // records section bytes
	writer  int64
	seq     int32
}

func (s batchSpec) bytes() []byte {
	w, seq := s.writer, s.seq
	if w == 0 {
		w, seq = record.NoWriterID, record.NoBatchSequence
	}
	b, _ := record.AppendBatch(nil, record.BatchHeader{SchemaID: 1, AppendOnly: true, WriterID: w, BatchSequence: seq}, s.records, payload(s.id, s.size))
	return b
}

// stored is what the model knows of a batch in the log.
type stored struct {
	base, last int64
	id         int64
	size       int // records section bytes
	ts         int64
	epoch      int32
}

// model is the expected log: batches in offset order.
type model struct {
	batches []stored
}

func (m *model) end(start int64) int64 {
	if len(m.batches) == 0 {
		return start
	}
	return m.batches[len(m.batches)-1].last + 1
}

// find returns the index of the batch holding offset.
func (m *model) find(offset int64) int {
	for i, b := range m.batches {
		if b.base <= offset && offset <= b.last {
			return i
		}
	}
	return -1
}

func (m *model) truncate(offset int64) {
	for i, b := range m.batches {
		if b.last >= offset {
			m.batches = m.batches[:i]
			return
		}
	}
}

// appendLeader appends specs as one call and records them in m.
func appendLeader(t testing.TB, tb *Tablet, m *model, epoch int32, now time.Time, specs ...batchSpec) AppendInfo {
	t.Helper()
	var buf []byte
	for _, s := range specs {
		buf = append(buf, s.bytes()...)
	}
	info, err := tb.AppendAsLeader(buf, epoch, now)
	if err != nil {
		t.Fatalf("AppendAsLeader: %v", err)
	}
	if info.Duplicate {
		t.Fatalf("AppendAsLeader: unexpected duplicate %+v", info)
	}
	o := info.FirstOffset
	for _, s := range specs {
		n := int64(max(s.records, 1))
		m.batches = append(m.batches, stored{base: o, last: o + n - 1, id: s.id, size: s.size, ts: info.CommitTimestamp, epoch: epoch})
		o += n
	}
	if o-1 != info.LastOffset {
		t.Fatalf("AppendInfo %+v, want last offset %d", info, o-1)
	}
	return info
}

// decode splits read bytes into batches, checking each (CRC included).
func decode(t testing.TB, buf []byte) []record.Batch {
	t.Helper()
	var out []record.Batch
	for len(buf) > 0 {
		b, rest, err := record.NextBatch(buf)
		if err != nil {
			t.Fatalf("read bytes are not whole batches: %v", err)
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("read batch at offset %d: %v", b.BaseOffset(), err)
		}
		out = append(out, b)
		buf = rest
	}
	return out
}

// checkBatch compares a read batch with the model's.
func checkBatch(t testing.TB, b record.Batch, want stored) {
	t.Helper()
	if b.BaseOffset() != want.base || b.LastOffset() != want.last {
		t.Fatalf("batch offsets [%d, %d], want [%d, %d]", b.BaseOffset(), b.LastOffset(), want.base, want.last)
	}
	if !bytes.Equal(b.Records(), payload(want.id, want.size)) {
		t.Fatalf("batch at %d: records differ from batch id %d", want.base, want.id)
	}
	if b.CommitTimestamp() != want.ts || b.LeaderEpoch() != want.epoch {
		t.Fatalf("batch at %d: timestamp %d epoch %d, want %d %d", want.base, b.CommitTimestamp(), b.LeaderEpoch(), want.ts, want.epoch)
	}
}

// readAll reads the whole log from its start (below maxOffset) and checks
// it against m: dense, every batch equal to the model's.
func readAll(t testing.TB, tb *Tablet, m *model, maxBytes int) {
	t.Helper()
	start, end := tb.LogStartOffset(), tb.LogEndOffset()
	if want := m.end(start); end != want {
		t.Fatalf("log end %d, model says %d", end, want)
	}
	i := m.find(start)
	if len(m.batches) > 0 && (i < 0 || m.batches[i].base != start) {
		t.Fatalf("log start %d is not a batch start of the model", start)
	}
	for o := start; o < end; {
		info, err := tb.Read(o, maxBytes, math.MaxInt64)
		if err != nil {
			t.Fatalf("Read(%d): %v", o, err)
		}
		bs := decode(t, info.Batches)
		if len(bs) == 0 {
			t.Fatalf("Read(%d) below the log end %d returned nothing", o, end)
		}
		for _, b := range bs {
			checkBatch(t, b, m.batches[i])
			i++
			o = b.NextOffset()
		}
	}
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func mustErrIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want one matching %v", err, target)
	}
}

// fixedNow is a clock for configurations.
func fixedNow(ms int64) func() time.Time {
	return func() time.Time { return time.UnixMilli(ms) }
}

// removeGlob deletes the files of dir matching pattern.
func removeGlob(t testing.TB, dir, pattern string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
}

// nextBatchChecked splits one batch off buf and validates it.
func nextBatchChecked(buf []byte) (record.Batch, []byte, error) {
	b, rest, err := record.NextBatch(buf)
	if err == nil {
		err = b.Validate()
	}
	return b, rest, err
}
