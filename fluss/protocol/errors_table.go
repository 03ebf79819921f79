// Code generated from apache/fluss v0.9.1-incubating Errors.java by gentables.py; DO NOT EDIT.

package protocol

// Fluss's error codes (Errors.java), carried in ErrorResponse.error_code.
const (
	UnknownServerError                    ErrorCode = -1
	None                                  ErrorCode = 0
	NetworkException                      ErrorCode = 1
	UnsupportedVersion                    ErrorCode = 2
	CorruptMessage                        ErrorCode = 3
	DatabaseNotExist                      ErrorCode = 4
	DatabaseNotEmpty                      ErrorCode = 5
	DatabaseAlreadyExist                  ErrorCode = 6
	TableNotExist                         ErrorCode = 7
	TableAlreadyExist                     ErrorCode = 8
	SchemaNotExist                        ErrorCode = 9
	LogStorageException                   ErrorCode = 10
	KvStorageException                    ErrorCode = 11
	NotLeaderOrFollower                   ErrorCode = 12
	RecordTooLargeException               ErrorCode = 13
	CorruptRecordException                ErrorCode = 14
	InvalidTableException                 ErrorCode = 15
	InvalidDatabaseException              ErrorCode = 16
	InvalidReplicationFactor              ErrorCode = 17
	InvalidRequiredAcks                   ErrorCode = 18
	LogOffsetOutOfRangeException          ErrorCode = 19
	NonPrimaryKeyTableException           ErrorCode = 20
	UnknownTableOrBucketException         ErrorCode = 21
	InvalidUpdateVersionException         ErrorCode = 22
	InvalidCoordinatorException           ErrorCode = 23
	FencedLeaderEpochException            ErrorCode = 24
	RequestTimeOut                        ErrorCode = 25
	StorageException                      ErrorCode = 26
	OperationNotAttemptedException        ErrorCode = 27
	NotEnoughReplicasAfterAppendException ErrorCode = 28
	NotEnoughReplicasException            ErrorCode = 29
	SecurityTokenException                ErrorCode = 30
	OutOfOrderSequenceException           ErrorCode = 31
	DuplicateSequenceException            ErrorCode = 32
	UnknownWriterIdException              ErrorCode = 33
	InvalidColumnProjection               ErrorCode = 34
	InvalidTargetColumn                   ErrorCode = 35
	PartitionNotExists                    ErrorCode = 36
	TableNotPartitionedException          ErrorCode = 37
	InvalidTimestampException             ErrorCode = 38
	InvalidConfigException                ErrorCode = 39
	LakeStorageNotConfiguredException     ErrorCode = 40
	KvSnapshotNotExist                    ErrorCode = 41
	PartitionAlreadyExists                ErrorCode = 42
	PartitionSpecInvalidException         ErrorCode = 43
	LeaderNotAvailableException           ErrorCode = 44
	PartitionMaxNumException              ErrorCode = 45
	AuthenticateException                 ErrorCode = 46
	SecurityDisabledException             ErrorCode = 47
	AuthorizationException                ErrorCode = 48
	BucketMaxNumException                 ErrorCode = 49
	FencedTieringEpochException           ErrorCode = 50
	RetriableAuthenticateException        ErrorCode = 51
	InvalidServerRackInfoException        ErrorCode = 52
	LakeSnapshotNotExist                  ErrorCode = 53
	LakeTableAlreadyExist                 ErrorCode = 54
	IneligibleReplicaException            ErrorCode = 55
	InvalidAlterTableException            ErrorCode = 56
	DeletionDisabledException             ErrorCode = 57
	ServerNotExistException               ErrorCode = 58
	SeverTagAlreadyExistException         ErrorCode = 59
	SeverTagNotExistException             ErrorCode = 60
	RebalanceFailureException             ErrorCode = 61
	NoRebalanceInProgressException        ErrorCode = 62
	InvalidProducerIdException            ErrorCode = 63
)

// errorCodes is Fluss's table: name and default message.
var errorCodes = map[ErrorCode]errorInfo{
	UnknownServerError:                    {"UNKNOWN_SERVER_ERROR", "The server experienced an unexpected error when processing the request."},
	None:                                  {"NONE", ""},
	NetworkException:                      {"NETWORK_EXCEPTION", "The server disconnected before a response was received."},
	UnsupportedVersion:                    {"UNSUPPORTED_VERSION", "The version of API is not supported."},
	CorruptMessage:                        {"CORRUPT_MESSAGE", "This message has failed its CRC checksum, exceeds the valid size, has a null key for a primary key table, or is otherwise corrupt."},
	DatabaseNotExist:                      {"DATABASE_NOT_EXIST", "The database does not exist."},
	DatabaseNotEmpty:                      {"DATABASE_NOT_EMPTY", "The database is not empty."},
	DatabaseAlreadyExist:                  {"DATABASE_ALREADY_EXIST", "The database already exists."},
	TableNotExist:                         {"TABLE_NOT_EXIST", "The table does not exist."},
	TableAlreadyExist:                     {"TABLE_ALREADY_EXIST", "The table already exists."},
	SchemaNotExist:                        {"SCHEMA_NOT_EXIST", "The schema does not exist."},
	LogStorageException:                   {"LOG_STORAGE_EXCEPTION", "Exception occur while storage data for log in server."},
	KvStorageException:                    {"KV_STORAGE_EXCEPTION", "Exception occur while storage data for kv in server."},
	NotLeaderOrFollower:                   {"NOT_LEADER_OR_FOLLOWER", "Not leader or follower."},
	RecordTooLargeException:               {"RECORD_TOO_LARGE_EXCEPTION", "The record is too large."},
	CorruptRecordException:                {"CORRUPT_RECORD_EXCEPTION", "The record is corrupt."},
	InvalidTableException:                 {"INVALID_TABLE_EXCEPTION", "The client has attempted to perform an operation on an invalid table."},
	InvalidDatabaseException:              {"INVALID_DATABASE_EXCEPTION", "The client has attempted to perform an operation on an invalid database."},
	InvalidReplicationFactor:              {"INVALID_REPLICATION_FACTOR", "The replication factor is larger then the number of available tablet servers."},
	InvalidRequiredAcks:                   {"INVALID_REQUIRED_ACKS", "Produce request specified an invalid value for required acks."},
	LogOffsetOutOfRangeException:          {"LOG_OFFSET_OUT_OF_RANGE_EXCEPTION", "The log offset is out of range."},
	NonPrimaryKeyTableException:           {"NON_PRIMARY_KEY_TABLE_EXCEPTION", "The table is not primary key table."},
	UnknownTableOrBucketException:         {"UNKNOWN_TABLE_OR_BUCKET_EXCEPTION", "The table or bucket does not exist."},
	InvalidUpdateVersionException:         {"INVALID_UPDATE_VERSION_EXCEPTION", "The update version is invalid."},
	InvalidCoordinatorException:           {"INVALID_COORDINATOR_EXCEPTION", "The coordinator is invalid."},
	FencedLeaderEpochException:            {"FENCED_LEADER_EPOCH_EXCEPTION", "The leader epoch is invalid."},
	RequestTimeOut:                        {"REQUEST_TIME_OUT", "The request time out."},
	StorageException:                      {"STORAGE_EXCEPTION", "The general storage exception."},
	OperationNotAttemptedException:        {"OPERATION_NOT_ATTEMPTED_EXCEPTION", "The server did not attempt to execute this operation."},
	NotEnoughReplicasAfterAppendException: {"NOT_ENOUGH_REPLICAS_AFTER_APPEND_EXCEPTION", "Records are written to the server already, but to fewer in-sync replicas than required."},
	NotEnoughReplicasException:            {"NOT_ENOUGH_REPLICAS_EXCEPTION", "Messages are rejected since there are fewer in-sync replicas than required."},
	SecurityTokenException:                {"SECURITY_TOKEN_EXCEPTION", "Get file access security token exception."},
	OutOfOrderSequenceException:           {"OUT_OF_ORDER_SEQUENCE_EXCEPTION", "The tablet server received an out of order sequence batch."},
	DuplicateSequenceException:            {"DUPLICATE_SEQUENCE_EXCEPTION", "The tablet server received a duplicate sequence batch."},
	UnknownWriterIdException:              {"UNKNOWN_WRITER_ID_EXCEPTION", "This exception is raised by the tablet server if it could not locate the writer metadata."},
	InvalidColumnProjection:               {"INVALID_COLUMN_PROJECTION", "The requested column projection is invalid."},
	InvalidTargetColumn:                   {"INVALID_TARGET_COLUMN", "The requested target column to write is invalid."},
	PartitionNotExists:                    {"PARTITION_NOT_EXISTS", "The partition does not exist."},
	TableNotPartitionedException:          {"TABLE_NOT_PARTITIONED_EXCEPTION", "The table is not partitioned."},
	InvalidTimestampException:             {"INVALID_TIMESTAMP_EXCEPTION", "The timestamp is invalid."},
	InvalidConfigException:                {"INVALID_CONFIG_EXCEPTION", "The config is invalid."},
	LakeStorageNotConfiguredException:     {"LAKE_STORAGE_NOT_CONFIGURED_EXCEPTION", "The lake storage is not configured."},
	KvSnapshotNotExist:                    {"KV_SNAPSHOT_NOT_EXIST", "The kv snapshot is not exist."},
	PartitionAlreadyExists:                {"PARTITION_ALREADY_EXISTS", "The partition already exists."},
	PartitionSpecInvalidException:         {"PARTITION_SPEC_INVALID_EXCEPTION", "The partition spec is invalid."},
	LeaderNotAvailableException:           {"LEADER_NOT_AVAILABLE_EXCEPTION", "There is no currently available leader for the given partition."},
	PartitionMaxNumException:              {"PARTITION_MAX_NUM_EXCEPTION", "Exceed the maximum number of partitions."},
	AuthenticateException:                 {"AUTHENTICATE_EXCEPTION", "Authentication failed."},
	SecurityDisabledException:             {"SECURITY_DISABLED_EXCEPTION", "Security is disabled."},
	AuthorizationException:                {"AUTHORIZATION_EXCEPTION", "Authorization failed"},
	BucketMaxNumException:                 {"BUCKET_MAX_NUM_EXCEPTION", "Exceed the maximum number of buckets"},
	FencedTieringEpochException:           {"FENCED_TIERING_EPOCH_EXCEPTION", "The tiering epoch is invalid."},
	RetriableAuthenticateException:        {"RETRIABLE_AUTHENTICATE_EXCEPTION", "Authentication failed with retriable exception. "},
	InvalidServerRackInfoException:        {"INVALID_SERVER_RACK_INFO_EXCEPTION", "The server rack info is invalid."},
	LakeSnapshotNotExist:                  {"LAKE_SNAPSHOT_NOT_EXIST", "The lake snapshot is not exist."},
	LakeTableAlreadyExist:                 {"LAKE_TABLE_ALREADY_EXIST", "The lake table already exists."},
	IneligibleReplicaException:            {"INELIGIBLE_REPLICA_EXCEPTION", "The new ISR contains at least one ineligible replica."},
	InvalidAlterTableException:            {"INVALID_ALTER_TABLE_EXCEPTION", "The alter table is invalid."},
	DeletionDisabledException:             {"DELETION_DISABLED_EXCEPTION", "Deletion operations are disabled on this table."},
	ServerNotExistException:               {"SERVER_NOT_EXIST_EXCEPTION", "The server is not exist."},
	SeverTagAlreadyExistException:         {"SEVER_TAG_ALREADY_EXIST_EXCEPTION", "The server tag already exist."},
	SeverTagNotExistException:             {"SEVER_TAG_NOT_EXIST_EXCEPTION", "The server tag not exist."},
	RebalanceFailureException:             {"REBALANCE_FAILURE_EXCEPTION", "The rebalance task failure."},
	NoRebalanceInProgressException:        {"NO_REBALANCE_IN_PROGRESS_EXCEPTION", "No rebalance task in progress."},
	InvalidProducerIdException:            {"INVALID_PRODUCER_ID_EXCEPTION", "The client has attempted to perform an operation with an invalid producer ID."},
}
