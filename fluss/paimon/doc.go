// Package paimon creates the Apache Paimon table of a Fluss lake table
// (table.datalake.enabled with datalake.format paimon) the way Fluss 0.9.1's
// coordinator does through its lake catalog (fluss-lake-paimon's
// PaimonLakeCatalog.createTable and PaimonConversions.toPaimonSchema), so
// that the real tiering job, Paimon and Flink's $lake and union reads find
// it: Paimon's first schema file, schema/schema-0 (TableSchema JSON, the
// shape Paimon 1.3.1's SchemaSerializer reads), under
// WAREHOUSE/DB.db/TABLE/ of a filesystem warehouse. Paimon writes
// everything else (snapshots, manifests, data files) itself when the tiering
// job commits. See DESIGN.md.
package paimon
