// Package arrowmsg owns the single Arrow IPC RecordBatch message that an ARROW
// log batch carries (FORMATS.md §4.3): reading it, pruning it to some columns,
// and converting it to and from arrow-go records.
//
//   - Parse checks a message's framing and flatbuffer metadata and exposes its
//     row count, field nodes, buffers, body compression and body.
//   - Project rewrites a message to keep only some top-level columns. It
//     rewrites the metadata and copies the chosen buffers byte for byte, still
//     compressed: it never decompresses or decodes anything. This is the fetch
//     path's column pruning (DESIGN.md §3).
//   - LayoutOf (LayoutsOf for a whole schema) says how many field nodes and
//     buffers a column of an Arrow type takes, which Project needs and the
//     caller derives from the table schema; Message.CheckLayouts checks a
//     message against them, as the append path should before storing it.
//   - Encode turns an arrow.RecordBatch into one message with Arrow's
//     per-buffer body compression (LZ4_FRAME or ZSTD, Arrow Java's rules);
//     Decode turns one message back into an arrow.RecordBatch given the
//     schema, which the message itself does not carry.
//
// Parse, Project and Decode take bytes from outside the process: they never
// panic on any input, and report bad bytes as errors wrapping ErrCorrupt.
// Mistakes of the caller (a column index out of range, an invalid layout) are
// plain errors.
//
// Everything here is a pure function over byte slices: safe for concurrent
// use, no I/O. DESIGN.md beside this file has the byte layout, the flatbuffer
// fields read and written, and the invariants.
package arrowmsg
