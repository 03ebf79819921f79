package log

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"strom/record"
)

// batchesOf returns the batches of a segment file and their positions.
func batchesOf(t *testing.T, path string) ([]record.Batch, []int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Batch
	var pos []int64
	for at := 0; at < len(data); {
		b, _, err := record.NextBatch(data[at:])
		if err != nil {
			t.Fatal(err)
		}
		out, pos = append(out, b), append(pos, int64(at))
		at += len(b)
	}
	return out, pos
}

// verifyRound runs VerifyStep over every sealed segment once.
func verifyRound(t *testing.T, tb *Tablet, step int64) {
	t.Helper()
	sealed := int64(0)
	for _, s := range tb.Segments() {
		if s.Sealed {
			sealed += s.Size
		}
	}
	for done := int64(0); done < sealed; {
		n, err := tb.VerifyStep(step)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("VerifyStep read nothing after %d of %d bytes", done, sealed)
		}
		done += n
	}
}

// The background check finds a batch damaged on disk in a sealed segment,
// logs and counts it once, and reads of its offsets are then refused while
// the rest of the log serves; damage that hides where a batch ends takes
// the rest of its segment. Before, nothing checked sealed segments' CRCs
// after Open and reads served the damaged bytes.
func TestVerifyStepFindsDamageAndReadsRefuseIt(t *testing.T) {
	cfg := testConfig(t)
	lg, logs := testLogger(t)
	cfg.Logger = lg
	tb := openT(t, cfg)
	m := &model{}
	for i := range 40 {
		appendLeader(t, tb, m, 0, t0, batchSpec{id: int64(i), records: 3, size: 300})
	}
	segs := tb.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	// A bit flipped inside the records of the second batch of segment 0,
	// and the length field of the first batch of segment 2.
	batches, pos := batchesOf(t, segs[0].Path)
	bad := batches[1]
	flipByte(t, segs[0].Path, pos[1]+int64(len(bad))-10)
	flipByte(t, segs[2].Path, 10)

	if n, err := tb.Read(bad.BaseOffset(), 1, math.MaxInt64); err != nil || len(n.Batches) == 0 {
		t.Fatalf("before the check, the damaged batch is read as stored: %v", err)
	}
	verifyRound(t, tb, 1000)
	if got := tb.CorruptBatches(); got != 2 {
		t.Fatalf("CorruptBatches = %d, want 2", got)
	}
	if got := strings.Count(logs.String(), "corrupt batch in a sealed segment"); got != 2 {
		t.Errorf("%d log lines about corrupt batches, want 2:\n%s", got, logs)
	}
	verifyRound(t, tb, 1<<20) // a second round finds the same, and says nothing more
	if got := tb.CorruptBatches(); got != 2 || tb.VerifiedBytes() == 0 {
		t.Errorf("after a second round: CorruptBatches %d, VerifiedBytes %d", got, tb.VerifiedBytes())
	}

	for _, r := range []struct{ from, to int64 }{
		{bad.BaseOffset(), bad.NextOffset()},     // only the batch
		{segs[2].BaseOffset, segs[2].NextOffset}, // the whole rest of the segment
	} {
		for _, o := range []int64{r.from, r.to - 1} {
			_, err := tb.Read(o, 1<<20, math.MaxInt64)
			var ce *CorruptRecordError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptRecord) || ce.Offset != r.from || ce.NextOffset != r.to {
				t.Errorf("Read(%d) = %v; want a CorruptRecordError for [%d, %d)", o, err, r.from, r.to)
			}
		}
		// Reads before the range stop at it; reads after it serve.
		if r.from > 0 {
			info, err := tb.Read(r.from-1, 1<<20, math.MaxInt64)
			if err != nil || len(info.Batches) == 0 {
				t.Errorf("Read(%d), before [%d, %d): %v", r.from-1, r.from, r.to, err)
			}
			for _, b := range decode(t, info.Batches) {
				if b.NextOffset() > r.from {
					t.Errorf("Read(%d) returned batch [%d, %d), into the damaged range from %d", r.from-1, b.BaseOffset(), b.NextOffset(), r.from)
				}
			}
		}
		if info, err := tb.Read(r.to, 1<<20, math.MaxInt64); err != nil || len(info.Batches) == 0 {
			t.Errorf("Read(%d), after [%d, %d): %v", r.to, r.from, r.to, err)
		}
	}
}
