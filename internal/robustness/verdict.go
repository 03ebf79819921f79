package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"strom/internal/robustness/check"
	"strom/internal/robustness/history"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

// checkHistory runs the history's checkers (queue, KV, metadata) with
// their HTML visualisations in dir, and adds fold, the fold check's result.
func checkHistory(h *history.History, dir string, fold check.Result) []check.Result {
	opts := check.Options{Dir: dir}
	return []check.Result{check.CheckQueue(h, opts), check.CheckKV(h, opts), check.CheckMetadata(h, opts), fold}
}

// foldCheck reads the primary-key table's changelog (bucket 0, from offset
// 0 to its end) and its contents through the API, after the workloads
// stopped, and checks that the one is the fold of the other. The contents
// are the bucket leader's: the API reaches no other replica.
func (w *workloads) foldCheck(ctx context.Context) check.Result {
	ctx, cancel := context.WithTimeout(ctx, finalDeadline)
	defer cancel()
	res := func(err error) check.Result {
		return check.Result{Checker: "fold", Error: fmt.Sprintf("robustness: read %s.%s: %v", database, kvTable, err)}
	}
	t, err := w.cl.Table(ctx, database, kvTable)
	if err != nil {
		return res(err)
	}
	end, err := t.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
	if err != nil {
		return res(err)
	}
	sc, err := bucketScanner(ctx, t, 0, 100*time.Millisecond)
	if err != nil {
		return res(err)
	}
	var changes []check.Change
	for sc.Position()[0] < end[0] {
		fs, err := sc.Poll(ctx)
		if err == nil {
			err = fs.Errors()
		}
		if err != nil && ctx.Err() != nil {
			return res(err)
		}
		for _, r := range fs.Records() {
			changes = append(changes, check.Change{Type: r.ChangeType, Key: r.Row[0].(string), Value: fmt.Sprint(r.Row)})
		}
		fs.Release()
	}
	rows, err := t.Scan(ctx, 0, 0)
	if err != nil {
		return res(err)
	}
	contents := map[string]string{}
	for _, r := range rows {
		contents[r[0].(string)] = fmt.Sprint(r)
	}
	return check.CheckFold(fmt.Sprintf("%s.%s bucket 0 (leader)", database, kvTable), contents, changes)
}

// finalGets looks every hot key the run used up once more, after the
// workloads stopped: KV linearizability then covers the last write of
// every key (a lost acknowledged write shows up as a stale read).
func (w *workloads) finalGets(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, finalDeadline)
	defer cancel()
	t, err := w.cl.Table(ctx, database, kvTable)
	if err != nil {
		return err
	}
	lk, err := t.NewLookuper()
	if err != nil {
		return err
	}
	defer lk.Close()
	id := w.rec.client()
	for e := int64(0); e <= w.epoch(); e++ {
		for i := range hotKeys {
			key := hotKey(e, i)
			op := history.Op{Client: id, Kind: history.KVGet, Table: database + "." + kvTable, Key: key, Invoke: w.rec.clock.Now()}
			row, err := lk.Get(ctx, record.Row{key})
			if err == nil && row != nil {
				op.Found, op.Value = true, valueOf(row)
			}
			w.rec.record(op, err, history.Fail)
			if err != nil {
				return fmt.Errorf("robustness: final get of %s: %w", key, err)
			}
		}
	}
	return nil
}

// excerpt returns the operations of a, as history lines, for the report.
func excerpt(h *history.History, a check.Anomaly, max int) string {
	var b strings.Builder
	for i, idx := range a.Ops {
		if i == max {
			fmt.Fprintf(&b, "      ... %d more\n", len(a.Ops)-max)
			break
		}
		if idx >= 0 && idx < len(h.Ops) {
			line, _ := json.Marshal(h.Ops[idx])
			fmt.Fprintf(&b, "      op %d: %s\n", idx, line)
		}
	}
	return b.String()
}
