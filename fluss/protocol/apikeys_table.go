// Code generated from apache/fluss v0.9.1-incubating ApiKeys.java by gentables.py; DO NOT EDIT.

package protocol

// Fluss's API keys (ApiKeys.java). Ids 0-999 are reserved by Fluss for Kafka.
const (
	ApiVersions                APIKey = 1000
	CreateDatabase             APIKey = 1001
	DropDatabase               APIKey = 1002
	ListDatabases              APIKey = 1003
	DatabaseExists             APIKey = 1004
	CreateTable                APIKey = 1005
	DropTable                  APIKey = 1006
	GetTableInfo               APIKey = 1007
	ListTables                 APIKey = 1008
	ListPartitionInfos         APIKey = 1009
	TableExists                APIKey = 1010
	GetTableSchema             APIKey = 1011
	GetMetadata                APIKey = 1012
	UpdateMetadata             APIKey = 1013
	ProduceLog                 APIKey = 1014
	FetchLog                   APIKey = 1015
	PutKv                      APIKey = 1016
	Lookup                     APIKey = 1017
	NotifyLeaderAndIsr         APIKey = 1018
	StopReplica                APIKey = 1019
	AdjustIsr                  APIKey = 1020
	ListOffsets                APIKey = 1021
	CommitKvSnapshot           APIKey = 1022
	GetLatestKvSnapshots       APIKey = 1023
	GetKvSnapshotMetadata      APIKey = 1024
	GetFilesystemSecurityToken APIKey = 1025
	InitWriter                 APIKey = 1026
	CommitRemoteLogManifest    APIKey = 1027
	NotifyRemoteLogOffsets     APIKey = 1028
	NotifyKvSnapshotOffset     APIKey = 1029
	CommitLakeTableSnapshot    APIKey = 1030
	NotifyLakeTableOffset      APIKey = 1031
	GetLakeSnapshot            APIKey = 1032
	LimitScan                  APIKey = 1033
	PrefixLookup               APIKey = 1034
	GetDatabaseInfo            APIKey = 1035
	CreatePartition            APIKey = 1036
	DropPartition              APIKey = 1037
	Authenticate               APIKey = 1038
	CreateAcls                 APIKey = 1039
	ListAcls                   APIKey = 1040
	DropAcls                   APIKey = 1041
	LakeTieringHeartbeat       APIKey = 1042
	ControlledShutdown         APIKey = 1043
	AlterTable                 APIKey = 1044
	DescribeClusterConfigs     APIKey = 1045
	AlterClusterConfigs        APIKey = 1046
	AddServerTag               APIKey = 1047
	RemoveServerTag            APIKey = 1048
	Rebalance                  APIKey = 1049
	ListRebalanceProgress      APIKey = 1050
	CancelRebalance            APIKey = 1051
	PrepareLakeTableSnapshot   APIKey = 1052
	RegisterProducerOffsets    APIKey = 1053
	GetProducerOffsets         APIKey = 1054
	DeleteProducerOffsets      APIKey = 1055
	AcquireKvSnapshotLease     APIKey = 1056
	ReleaseKvSnapshotLease     APIKey = 1057
	DropKvSnapshotLease        APIKey = 1058
	GetTableStats              APIKey = 1059
)

// apiKeys is Fluss's table, in its order: name, version range, visibility.
var apiKeys = []APIInfo{
	{ApiVersions, "API_VERSIONS", 0, 0, true},
	{CreateDatabase, "CREATE_DATABASE", 0, 0, true},
	{DropDatabase, "DROP_DATABASE", 0, 0, true},
	{ListDatabases, "LIST_DATABASES", 0, 0, true},
	{DatabaseExists, "DATABASE_EXISTS", 0, 0, true},
	{CreateTable, "CREATE_TABLE", 0, 0, true},
	{DropTable, "DROP_TABLE", 0, 0, true},
	{GetTableInfo, "GET_TABLE_INFO", 0, 0, true},
	{ListTables, "LIST_TABLES", 0, 0, true},
	{ListPartitionInfos, "LIST_PARTITION_INFOS", 0, 0, true},
	{TableExists, "TABLE_EXISTS", 0, 0, true},
	{GetTableSchema, "GET_TABLE_SCHEMA", 0, 0, true},
	{GetMetadata, "GET_METADATA", 0, 0, true},
	{UpdateMetadata, "UPDATE_METADATA", 0, 0, false},
	{ProduceLog, "PRODUCE_LOG", 0, 0, true},
	{FetchLog, "FETCH_LOG", 0, 0, true},
	{PutKv, "PUT_KV", 0, 1, true},
	{Lookup, "LOOKUP", 0, 1, true},
	{NotifyLeaderAndIsr, "NOTIFY_LEADER_AND_ISR", 0, 0, false},
	{StopReplica, "STOP_REPLICA", 0, 0, false},
	{AdjustIsr, "ADJUST_ISR", 0, 0, false},
	{ListOffsets, "LIST_OFFSETS", 0, 0, true},
	{CommitKvSnapshot, "COMMIT_KV_SNAPSHOT", 0, 0, false},
	{GetLatestKvSnapshots, "GET_LATEST_KV_SNAPSHOTS", 0, 0, true},
	{GetKvSnapshotMetadata, "GET_KV_SNAPSHOT_METADATA", 0, 0, true},
	{GetFilesystemSecurityToken, "GET_FILESYSTEM_SECURITY_TOKEN", 0, 0, true},
	{InitWriter, "INIT_WRITER", 0, 0, true},
	{CommitRemoteLogManifest, "COMMIT_REMOTE_LOG_MANIFEST", 0, 0, false},
	{NotifyRemoteLogOffsets, "NOTIFY_REMOTE_LOG_OFFSETS", 0, 0, false},
	{NotifyKvSnapshotOffset, "NOTIFY_KV_SNAPSHOT_OFFSET", 0, 0, false},
	{CommitLakeTableSnapshot, "COMMIT_LAKE_TABLE_SNAPSHOT", 0, 0, false},
	{NotifyLakeTableOffset, "NOTIFY_LAKE_TABLE_OFFSET", 0, 0, false},
	{GetLakeSnapshot, "GET_LAKE_SNAPSHOT", 0, 0, true},
	{LimitScan, "LIMIT_SCAN", 0, 0, true},
	{PrefixLookup, "PREFIX_LOOKUP", 0, 1, true},
	{GetDatabaseInfo, "GET_DATABASE_INFO", 0, 0, true},
	{CreatePartition, "CREATE_PARTITION", 0, 0, true},
	{DropPartition, "DROP_PARTITION", 0, 0, true},
	{Authenticate, "AUTHENTICATE", 0, 0, true},
	{CreateAcls, "CREATE_ACLS", 0, 0, true},
	{ListAcls, "LIST_ACLS", 0, 0, true},
	{DropAcls, "DROP_ACLS", 0, 0, true},
	{LakeTieringHeartbeat, "LAKE_TIERING_HEARTBEAT", 0, 0, false},
	{ControlledShutdown, "CONTROLLED_SHUTDOWN", 0, 0, false},
	{AlterTable, "ALTER_TABLE", 0, 0, true},
	{DescribeClusterConfigs, "DESCRIBE_CLUSTER_CONFIGS", 0, 0, true},
	{AlterClusterConfigs, "ALTER_CLUSTER_CONFIGS", 0, 0, true},
	{AddServerTag, "ADD_SERVER_TAG", 0, 0, true},
	{RemoveServerTag, "REMOVE_SERVER_TAG", 0, 0, true},
	{Rebalance, "REBALANCE", 0, 0, true},
	{ListRebalanceProgress, "LIST_REBALANCE_PROGRESS", 0, 0, true},
	{CancelRebalance, "CANCEL_REBALANCE", 0, 0, true},
	{PrepareLakeTableSnapshot, "PREPARE_LAKE_TABLE_SNAPSHOT", 0, 0, false},
	{RegisterProducerOffsets, "REGISTER_PRODUCER_OFFSETS", 0, 0, true},
	{GetProducerOffsets, "GET_PRODUCER_OFFSETS", 0, 0, true},
	{DeleteProducerOffsets, "DELETE_PRODUCER_OFFSETS", 0, 0, true},
	{AcquireKvSnapshotLease, "ACQUIRE_KV_SNAPSHOT_LEASE", 0, 0, true},
	{ReleaseKvSnapshotLease, "RELEASE_KV_SNAPSHOT_LEASE", 0, 0, true},
	{DropKvSnapshotLease, "DROP_KV_SNAPSHOT_LEASE", 0, 0, true},
	{GetTableStats, "GET_TABLE_STATS", 0, 0, true},
}
