package catalog

import "fmt"

// RemoteLogPrefix is where a table's tiered log segments are kept:
// log/<db>/<table>-<table id>/ (Fluss's layout), a directory per bucket.
func RemoteLogPrefix(db, table string, tableID int64) string {
	return fmt.Sprintf("log/%s/%s-%d/", db, table, tableID)
}

// RemoteKVPrefix is where a table's KV snapshots are kept:
// kv/<db>/<table>-<table id>/, a directory per bucket.
func RemoteKVPrefix(db, table string, tableID int64) string {
	return fmt.Sprintf("kv/%s/%s-%d/", db, table, tableID)
}
