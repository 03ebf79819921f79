// Package record owns the formats that clients and servers both speak: what a
// table is, and how its rows travel and rest. It follows Apache Fluss's
// fluss-common:
//
//   - column types (DataType, ParseDataType), in Fluss's SQL spelling and
//     Fluss's JSON shape;
//
//   - schemas (Schema, Column, ParseColumns), in Fluss's JSON shape;
//
//   - table descriptors (TableDescriptor) and their validation and defaults
//     (Normalize);
//
//   - table options (TableOptions, OptionDefault): Fluss's table.* keys,
//     defaults, value types, and the rules between them;
//
//   - database and table names (ValidateDatabaseName, ValidateTableName,
//     ParseTablePath).
//
//   - values and rows (Row, CheckValue) and rows as JSON and CSV (ROWS.md);
//
//   - the log record batch (Batch, AppendBatch, NextBatch), change types,
//     Arrow encoding and decoding (ArrowBuilder, DecodeArrowBatch), checks
//     with the readers' own checks (CheckArrowBatch) and column projection without
//     decoding (ProjectBatch, through the subpackage arrowmsg);
//
//   - the bucketing function, the compacted key and row codecs and the KV
//     batch (CODECS.md).
//
// Validation reports every problem at once, as errors.Join of *InvalidError,
// each naming the offending field; InvalidErrors flattens them.
//
// Everything here is a value or a pure function: safe for concurrent use, no
// I/O. record imports nothing of Strom's but its own subpackage arrowmsg; of
// third-party code only Apache Arrow's Go library.
package record
