package kv

// preWriteBuffer holds the rows written to the log but not yet known to be
// committed (Fluss's KvPreWriteBuffer): one entry per changed key per
// changelog batch, in log-offset order. The newest entry of each key
// shadows Pebble for the leader's read-modify-write; readers (Lookup, scans)
// never see it. Entries leave it either into Pebble (flush, offset < high
// watermark) or into nothing (truncation of the log above the high
// watermark). Not safe for concurrent use: Tablet.mu guards it.
type preWriteBuffer struct {
	entries []*bufEntry          // ascending offsets
	head    int                  // entries[:head] are flushed and nil
	latest  map[string]*bufEntry // key → newest entry
	bytes   int                  // sum of key and value sizes held
	// ends are the end offsets (next offsets) of the changelog batches
	// buffered, ascending. The log commits and truncates whole batches (a
	// reader below the high watermark sees only whole batches), so the
	// buffer flushes and truncates at these boundaries only.
	ends []int64
}

type bufEntry struct {
	offset     int64  // log offset of the changelog row that produced it
	key        string // compacted primary key
	value      []byte // KV value (schema id + row); nil for a delete
	prev, next *bufEntry
}

func newPreWriteBuffer() *preWriteBuffer {
	return &preWriteBuffer{latest: map[string]*bufEntry{}}
}

// get returns the newest value buffered for key: found is false when the
// buffer has nothing for it (read Pebble), value nil when it is deleted.
func (b *preWriteBuffer) get(key []byte) (value []byte, found bool) {
	e, ok := b.latest[string(key)]
	if !ok {
		return nil, false
	}
	return e.value, true
}

// put adds an entry at offset, which must not be below the last entry's.
func (b *preWriteBuffer) put(offset int64, key string, value []byte) {
	e := &bufEntry{offset: offset, key: key, value: value}
	if p, ok := b.latest[key]; ok {
		e.prev, p.next = p, e
	}
	b.latest[key] = e
	b.entries = append(b.entries, e)
	b.bytes += len(key) + len(value)
}

// endBatch records the end offset of a batch whose entries have been put.
func (b *preWriteBuffer) endBatch(end int64) { b.ends = append(b.ends, end) }

// boundary returns the largest batch end ≤ limit, or floor when none is.
func (b *preWriteBuffer) boundary(limit, floor int64) int64 {
	out := floor
	for _, e := range b.ends {
		if e > limit {
			break
		}
		out = e
	}
	return out
}

// dropEnds forgets the batch ends ≤ upTo (flushed).
func (b *preWriteBuffer) dropEnds(upTo int64) {
	i := 0
	for i < len(b.ends) && b.ends[i] <= upTo {
		i++
	}
	b.ends = append(b.ends[:0], b.ends[i:]...)
}

// len is the number of entries held.
func (b *preWriteBuffer) len() int { return len(b.entries) - b.head }

// below returns the entries with offset < end, oldest first, without
// removing them.
func (b *preWriteBuffer) below(end int64) []*bufEntry {
	i := b.head
	for i < len(b.entries) && b.entries[i].offset < end {
		i++
	}
	return b.entries[b.head:i]
}

// drop removes the n oldest entries (which have been flushed).
func (b *preWriteBuffer) drop(n int) {
	for _, e := range b.entries[b.head : b.head+n] {
		if e.next != nil {
			e.next.prev = nil
		} else {
			delete(b.latest, e.key)
		}
		b.bytes -= len(e.key) + len(e.value)
	}
	clear(b.entries[b.head : b.head+n])
	b.head += n
	if b.head == len(b.entries) {
		b.entries, b.head = b.entries[:0], 0
	} else if b.head > 1024 && b.head > len(b.entries)/2 {
		b.entries = append(b.entries[:0], b.entries[b.head:]...)
		b.head = 0
	}
}

// truncateTo removes every entry with offset ≥ offset, newest first, so
// each key's newest remaining entry shows again.
func (b *preWriteBuffer) truncateTo(offset int64) {
	for len(b.entries) > b.head {
		e := b.entries[len(b.entries)-1]
		if e.offset < offset {
			break
		}
		if e.prev != nil {
			e.prev.next = nil
			b.latest[e.key] = e.prev
		} else {
			delete(b.latest, e.key)
		}
		b.bytes -= len(e.key) + len(e.value)
		b.entries[len(b.entries)-1] = nil
		b.entries = b.entries[:len(b.entries)-1]
	}
	if b.head == len(b.entries) {
		b.entries, b.head = b.entries[:0], 0
	}
	for len(b.ends) > 0 && b.ends[len(b.ends)-1] > offset {
		b.ends = b.ends[:len(b.ends)-1]
	}
}
