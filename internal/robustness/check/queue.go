package check

import (
	"fmt"

	"strom/internal/robustness/history"
)

// position is a record's place: its table, bucket and offset.
type position struct {
	table  string
	bucket int32
	offset int64
}

func (p position) String() string {
	return fmt.Sprintf("%s bucket %d offset %d", p.table, p.bucket, p.offset)
}

// seen is where a value was first read, or the value first read at a
// position: with the read that saw it.
type seen struct {
	pos   position
	value string
	op    int
}

// CheckQueue checks the log tables of a history (its LogAppend and LogRead
// operations; others are ignored), Jepsen's total-queue checks plus
// Kafka's:
//
//   - every OK append is in the final reads of its table (lost), at the
//     offset it was acknowledged at (offset_mismatch);
//   - no value is read at two positions (duplicate), which also holds an
//     unknown append to at most once;
//   - no value is read that was never appended or whose append failed
//     (phantom);
//   - two reads never disagree on the value at a position, whenever they
//     ran (conflicting_offset);
//   - each read's records are dense from the offset it started at, and a
//     client's next read of a bucket starts no later than where its
//     previous one ended (gap);
//   - no record is read at or above the high watermark its read reported
//     (above_high_watermark).
//
// Only OK reads count. It runs in time and memory linear in the records
// read plus the appends.
func CheckQueue(h *history.History, opts Options) Result {
	opts = opts.withDefaults()
	r := &Result{Checker: "queue"}
	add := func(kind string, detail string, ops ...int) {
		r.add(opts.MaxAnomalies, Anomaly{Kind: kind, Ops: ops, Detail: detail})
	}
	appends := 0
	for _, op := range h.Ops {
		if op.Kind == history.LogAppend {
			appends++
		}
	}
	// Sized for the appends: the maps hold about one entry per record.
	appended := make(map[string]int, appends) // value -> its append's op index
	finalTables := map[string]bool{}
	for i, op := range h.Ops {
		switch {
		case op.Kind == history.LogAppend:
			r.Ops++
			if j, dup := appended[op.Value]; dup {
				add(AnomalyMalformed, fmt.Sprintf("value %q appended twice: append values must be unique", op.Value), j, i)
				continue
			}
			appended[op.Value] = i
		case op.Kind == history.LogRead:
			r.Ops++
			if op.Final && op.Outcome == history.OK {
				finalTables[op.Table] = true
			}
		}
	}

	atPos := make(map[position]seen, appends)   // the first value read at a position
	whereRead := make(map[string]seen, appends) // the first position a value was read at
	inFinal := make(map[string]bool, appends)   // values in the final reads
	type stream struct {
		client int
		table  string
		bucket int32
	}
	next := map[stream]seen{} // where each client's last read of a bucket ended
	for i, op := range h.Ops {
		if op.Kind != history.LogRead || op.Outcome != history.OK {
			continue
		}
		s := stream{op.Client, op.Table, op.Bucket}
		if prev, ok := next[s]; ok && op.Offset > prev.pos.offset {
			add(AnomalyGap, fmt.Sprintf("client %d read %s bucket %d up to offset %d, then from %d: offsets %d-%d skipped",
				op.Client, op.Table, op.Bucket, prev.pos.offset, op.Offset, prev.pos.offset, op.Offset-1), prev.op, i)
		}
		for k, rec := range op.Records {
			pos := position{op.Table, op.Bucket, rec.Offset}
			if want := op.Offset + int64(k); rec.Offset != want {
				add(AnomalyGap, fmt.Sprintf("read of %s bucket %d from offset %d: record %d is at offset %d, want %d",
					op.Table, op.Bucket, op.Offset, k, rec.Offset, want), i)
			}
			if rec.Offset >= op.HighWatermark {
				add(AnomalyAboveHW, fmt.Sprintf("%s read with high watermark %d", pos, op.HighWatermark), i)
			}
			if first, ok := atPos[pos]; !ok {
				atPos[pos] = seen{pos, rec.Value, i}
			} else if first.value != rec.Value {
				add(AnomalyConflict, fmt.Sprintf("%s read as %q, later as %q", pos, first.value, rec.Value), first.op, i)
			}
			if first, ok := whereRead[rec.Value]; !ok {
				whereRead[rec.Value] = seen{pos, rec.Value, i}
				switch a, ok := appended[rec.Value]; {
				case !ok:
					add(AnomalyPhantom, fmt.Sprintf("value %q read at %s was never appended", rec.Value, pos), i)
				case h.Ops[a].Outcome == history.Fail:
					add(AnomalyPhantom, fmt.Sprintf("value %q read at %s: its append failed (definitely not applied)", rec.Value, pos), a, i)
				}
			} else if first.pos != pos {
				add(AnomalyDuplicate, fmt.Sprintf("value %q read at %s and at %s", rec.Value, first.pos, pos), first.op, i)
			}
			if op.Final {
				inFinal[rec.Value] = true
			}
		}
		next[s] = seen{pos: position{op.Table, op.Bucket, op.Offset + int64(len(op.Records))}, op: i}
	}

	missingFinal := map[string]bool{}
	for i, op := range h.Ops {
		if op.Kind != history.LogAppend || op.Outcome != history.OK || appended[op.Value] != i {
			continue // not an acknowledged append, or a malformed repeat
		}
		if !finalTables[op.Table] {
			if !missingFinal[op.Table] {
				missingFinal[op.Table] = true
				add(AnomalyMalformed, fmt.Sprintf("appends to %s acknowledged but no final read of it: lost appends cannot be checked", op.Table), i)
			}
			continue
		}
		ack := position{op.Table, op.Bucket, op.Offset}
		if !inFinal[op.Value] {
			add(AnomalyLost, fmt.Sprintf("value %q acknowledged at %s is not in the final reads", op.Value, ack), i)
		}
		if at, ok := whereRead[op.Value]; ok && at.pos != ack {
			add(AnomalyOffsetMismatch, fmt.Sprintf("value %q acknowledged at %s, read at %s", op.Value, ack, at.pos), i, at.op)
		}
	}
	return r.finish()
}
