package log

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"strom/record"
)

// The leader epoch cache (Kafka's LeaderEpochFileCache, KIP-101): for each
// leader epoch that wrote to this log, the offset of its first batch. A
// follower asks the leader for the end offset of its latest epoch and
// truncates to the true point of divergence.

// epochFile is the epoch cache's checkpoint in the tablet directory.
const epochFile = "leader-epoch-checkpoint"

// UndefinedOffset is what EndOffsetForEpoch returns, with
// record.NoLeaderEpoch, for an epoch the log cannot answer for.
const UndefinedOffset int64 = -1

// EpochEntry says leader epoch Epoch wrote its first batch at StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache holds entries with strictly increasing epochs and
// non-decreasing start offsets. Not safe for concurrent use.
type epochCache struct {
	entries []EpochEntry
}

func (c *epochCache) latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// latestEpoch is the latest epoch, or record.NoLeaderEpoch.
func (c *epochCache) latestEpoch() int32 {
	if e, ok := c.latest(); ok {
		return e.Epoch
	}
	return record.NoLeaderEpoch
}

// assign records that epoch e.Epoch starts at e.StartOffset, as Kafka's
// assign does: nothing changes if the latest entry already has this epoch
// at or before that offset; otherwise every entry that contradicts the new
// one (same or later epoch, same or later start) is dropped and the new one
// appended. It reports whether the cache changed.
func (c *epochCache) assign(e EpochEntry) bool {
	if l, ok := c.latest(); ok && l.Epoch == e.Epoch && l.StartOffset <= e.StartOffset {
		return false
	}
	kept := c.entries[:0]
	for _, x := range c.entries {
		if x.Epoch < e.Epoch && x.StartOffset < e.StartOffset {
			kept = append(kept, x)
		}
	}
	c.entries = append(kept, e)
	return true
}

// truncateFromEnd drops the entries starting at or after end (the log was
// cut there). It reports whether the cache changed.
func (c *epochCache) truncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart follows the log start forward: entries starting at or
// before start are dropped, and the last of them comes back starting at
// start (its epoch still covers the first remaining batches). It reports
// whether the cache changed.
func (c *epochCache) truncateFromStart(start int64) bool {
	if len(c.entries) == 0 || c.entries[0].StartOffset >= start {
		return false
	}
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= start {
		i++
	}
	last := c.entries[i-1]
	last.StartOffset = start
	c.entries = append([]EpochEntry{last}, c.entries[i:]...)
	return true
}

// endOffsetFor answers a follower's OffsetForLeaderEpoch (KIP-101): the
// largest epoch ≤ epoch the cache knows and the start offset of the epoch
// after it, or logEnd when it is the latest (so also for an epoch newer
// than the latest). For an epoch older than every entry it returns epoch
// itself and the first entry's start offset (Kafka's answer: the log holds
// nothing of that epoch). With an empty cache, or for
// record.NoLeaderEpoch, it returns (record.NoLeaderEpoch, UndefinedOffset).
func (c *epochCache) endOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	if len(c.entries) == 0 || epoch == record.NoLeaderEpoch {
		return record.NoLeaderEpoch, UndefinedOffset
	}
	i := 0 // the first entry with a larger epoch, or len
	for i < len(c.entries) && c.entries[i].Epoch <= epoch {
		i++
	}
	switch {
	case i == 0:
		return epoch, c.entries[0].StartOffset
	case i == len(c.entries):
		return c.entries[i-1].Epoch, logEnd
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset
}

func (c *epochCache) clone() []EpochEntry {
	return append([]EpochEntry(nil), c.entries...)
}

// encodeEpochs writes Kafka's text checkpoint format: a version line (0),
// a count line, then one "epoch startOffset" line per entry.
func encodeEpochs(es []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(es))
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// parseEpochs reads encodeEpochs' format and checks the entries' order.
func parseEpochs(data []byte) ([]EpochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	v, ok := line()
	if !ok || v != "0" {
		return nil, fmt.Errorf("version line %q, want \"0\"", v)
	}
	cs, ok := line()
	n, err := strconv.Atoi(cs)
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("count line %q is not a count", cs)
	}
	es := make([]EpochEntry, 0, n)
	for i := range n {
		l, ok := line()
		if !ok {
			return nil, fmt.Errorf("%d entries, count says %d", i, n)
		}
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("entry %d %q is not \"epoch offset\"", i, l)
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return nil, fmt.Errorf("entry %d %q is not \"epoch offset\"", i, l)
		}
		e := EpochEntry{Epoch: int32(ep), StartOffset: off}
		if i > 0 && (e.Epoch <= es[i-1].Epoch || e.StartOffset < es[i-1].StartOffset) {
			return nil, fmt.Errorf("entry %d %q does not follow %v", i, l, es[i-1])
		}
		es = append(es, e)
	}
	if l, ok := line(); ok && l != "" {
		return nil, fmt.Errorf("trailing line %q after %d entries", l, n)
	}
	return es, nil
}
