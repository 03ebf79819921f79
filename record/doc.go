// Package record owns the formats that clients and servers both speak: what a
// table is and, later, how its rows travel and rest.
//
// So far it holds the table model, following Apache Fluss's fluss-common:
//
//   - column types (DataType, ParseDataType), in Fluss's SQL spelling and
//     Fluss's JSON shape;
//   - schemas (Schema, Column, ParseColumns), in Fluss's JSON shape;
//   - table descriptors (TableDescriptor) and their validation and defaults
//     (Normalize);
//   - table options (TableOptions, OptionDefault): Fluss's table.* keys,
//     defaults, value types, and the rules between them;
//   - database and table names (ValidateDatabaseName, ValidateTableName,
//     ParseTablePath).
//
// Later it will also hold the log and KV batch layouts, change types, Arrow
// encoding and projection, the compacted row and key codecs, and the
// bucketing function.
//
// Validation reports every problem at once, as errors.Join of *InvalidError,
// each naming the offending field; InvalidErrors flattens them.
//
// Everything here is a value or a pure function: safe for concurrent use, no
// I/O. record imports nothing else of Strom's and nothing outside the
// standard library.
package record
