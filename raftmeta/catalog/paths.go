package catalog

import (
	"strconv"
)

// Root is the znode under which Strom keeps its metadata. Fluss uses /fluss;
// a root of our own lets real Fluss servers share the ZooKeeper shim with us.
const Root = "/strom"

// Paths of the fixed znodes, created by the coordinator when it first leads.
const (
	metadataPath          = Root + "/metadata"
	databasesPath         = metadataPath + "/databases"
	tableSeqIDPath        = metadataPath + "/table_seqid"
	partitionSeqIDPath    = metadataPath + "/partition_seqid"
	writerIDPath          = metadataPath + "/writer_id"
	coordinatorsPath      = Root + "/coordinators"
	coordinatorIDsPath    = coordinatorsPath + "/ids"
	coordinatorActivePath = coordinatorsPath + "/active"
	coordinatorEpochPath  = coordinatorsPath + "/epoch"
	tabletServersPath     = Root + "/tabletservers"
	tabletServerIDsPath   = tabletServersPath + "/ids"
	assignmentsPath       = tabletServersPath + "/tables"
	clusterIDPath         = Root + "/cluster_id"
	featuresPath          = Root + "/features"
)

// fixedPaths lists the persistent znodes every later write relies on, parents
// before children.
var fixedPaths = []string{
	Root,
	metadataPath,
	databasesPath,
	tableSeqIDPath,
	partitionSeqIDPath,
	writerIDPath,
	coordinatorsPath,
	coordinatorIDsPath,
	tabletServersPath,
	tabletServerIDsPath,
	assignmentsPath,
}

func databasePath(db string) string       { return databasesPath + "/" + db }
func tablesPath(db string) string         { return databasePath(db) + "/tables" }
func tablePath(db, table string) string   { return tablesPath(db) + "/" + table }
func schemasPath(db, table string) string { return tablePath(db, table) + "/schemas" }
func tabletServerIDPath(id int32) string  { return tabletServerIDsPath + "/" + itoa(id) }
func assignmentPath(tableID int64) string {
	return assignmentsPath + "/" + strconv.FormatInt(tableID, 10)
}
func bucketsPath(tableID int64) string     { return assignmentPath(tableID) + "/buckets" }
func partitionsPath(db, tbl string) string { return tablePath(db, tbl) + "/partitions" }

func schemaPath(db, table string, id int32) string {
	return schemasPath(db, table) + "/" + itoa(id)
}

func bucketPath(tableID int64, bucket int32) string {
	return bucketsPath(tableID) + "/" + itoa(bucket)
}

func leaderISRPath(tableID int64, bucket int32) string {
	return bucketPath(tableID, bucket) + "/leader_isr"
}

func itoa(i int32) string { return strconv.FormatInt(int64(i), 10) }
