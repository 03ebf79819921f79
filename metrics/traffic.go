package metrics

import "sync/atomic"

// Traffic counts the rows and bytes a bucket (or a node) takes in from
// writers and serves to readers. Its methods are safe for concurrent use,
// take no lock and allocate nothing: the data path calls them on every
// produce and fetch. The zero value is ready to use.
type Traffic struct {
	messagesIn, bytesIn, messagesOut, bytesOut atomic.Int64
}

// In counts rows and bytes appended by a write.
func (t *Traffic) In(rows, bytes int) {
	t.messagesIn.Add(int64(rows))
	t.bytesIn.Add(int64(bytes))
}

// Out counts rows and bytes served by a fetch.
func (t *Traffic) Out(rows, bytes int) {
	t.messagesOut.Add(int64(rows))
	t.bytesOut.Add(int64(bytes))
}

// Counts returns the totals so far.
func (t *Traffic) Counts() TrafficCounts {
	return TrafficCounts{
		MessagesIn: t.messagesIn.Load(), BytesIn: t.bytesIn.Load(),
		MessagesOut: t.messagesOut.Load(), BytesOut: t.bytesOut.Load(),
	}
}

// TrafficCounts is a reading of a Traffic.
type TrafficCounts struct {
	MessagesIn, BytesIn, MessagesOut, BytesOut int64
}
