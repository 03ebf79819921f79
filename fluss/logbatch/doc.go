// Package logbatch converts log record batches between the layouts the Fluss
// 0.9.1 client writes and reads and the layout Strom stores
// (/work/shared/FORMATS.md §4.1, record/batch.go):
//
//   - ToStrom: a PRODUCE_LOG request's batches, Fluss's V0 (48-byte header,
//     what the 0.9.1 client writes) or 0.9.1's V1 (52 bytes, LeaderEpoch at
//     21), become Strom's V2 (56 bytes: LeaderEpoch at 21 and
//     StatisticsLength 0 at 52). Each batch's CRC is checked first.
//   - ToFluss: a fetch answer's V2 batches become 0.9.1's V1, which the
//     0.9.1 client reads: the epoch kept, StatisticsLength and any
//     statistics dropped.
//
// Only headers change. The records section (for ARROW: the change-type
// vector and the one Arrow IPC message; for COMPACTED and INDEXED the rows) is
// the same bytes in every layout and is copied verbatim, never decoded, so a
// pruned (projected) batch converts like a full one. The CRC covers the
// header from SchemaId on and the records, so inserting or dropping fields
// changes it; the new CRC is derived from the old one in O(log n) (crc.go)
// rather than by a second pass over the records, which also means a batch
// whose stored CRC is wrong still has a wrong CRC after conversion:
// corruption is carried to the reader, never masked.
//
// Everything here is a pure function of its arguments, safe for concurrent
// use; nothing retains or modifies the input.
package logbatch
