// Package rpc holds what the API handlers share: the one table that maps
// domain errors to wire errors, and the interceptors.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"strom/fluss/paimon"
	"strom/raftmeta"
	"strom/raftmeta/catalog"
	"strom/record"
	"strom/remote"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/server/coordinator"
	"strom/tablet/kv"
	"strom/tablet/log"
	"strom/tablet/replica"
)

// Code is a Strom error code: Fluss's number and name where Fluss has the
// error, with the Connect code it travels under.
type Code struct {
	Num       int32
	Name      string
	Connect   connect.Code
	Retriable bool
}

// The codes in use. Numbers are Fluss's (org.apache.fluss.rpc.protocol.Errors).
var (
	CodeUnknown             = Code{-1, "UNKNOWN_SERVER_ERROR", connect.CodeInternal, false}
	CodeCorruptMessage      = Code{3, "CORRUPT_MESSAGE", connect.CodeInvalidArgument, false}
	CodeDatabaseNotExist    = Code{4, "DATABASE_NOT_EXIST", connect.CodeNotFound, false}
	CodeDatabaseNotEmpty    = Code{5, "DATABASE_NOT_EMPTY", connect.CodeFailedPrecondition, false}
	CodeDatabaseExists      = Code{6, "DATABASE_ALREADY_EXIST", connect.CodeAlreadyExists, false}
	CodeTableNotExist       = Code{7, "TABLE_NOT_EXIST", connect.CodeNotFound, false}
	CodeTableExists         = Code{8, "TABLE_ALREADY_EXIST", connect.CodeAlreadyExists, false}
	CodeInvalidTable        = Code{15, "INVALID_TABLE_EXCEPTION", connect.CodeInvalidArgument, false}
	CodeInvalidDatabase     = Code{16, "INVALID_DATABASE_EXCEPTION", connect.CodeInvalidArgument, false}
	CodeInvalidReplication  = Code{17, "INVALID_REPLICATION_FACTOR", connect.CodeFailedPrecondition, true}
	CodeRequestTimeout      = Code{25, "REQUEST_TIME_OUT", connect.CodeDeadlineExceeded, true}
	CodeStorage             = Code{26, "STORAGE_EXCEPTION", connect.CodeInternal, false}
	CodeNotCoordinator      = Code{65, "NOT_COORDINATOR_LEADER_EXCEPTION", connect.CodeUnavailable, true}
	CodeCanceled            = Code{-1, "CANCELED", connect.CodeCanceled, false}
	CodeInvalidConfigOption = Code{39, "INVALID_CONFIG_EXCEPTION", connect.CodeInvalidArgument, false}
	CodeNotLeader           = Code{12, "NOT_LEADER_OR_FOLLOWER", connect.CodeUnavailable, true}
	CodeSchemaNotExist      = Code{9, "SCHEMA_NOT_EXIST", connect.CodeInvalidArgument, false}
	CodeOffsetOutOfRange    = Code{19, "LOG_OFFSET_OUT_OF_RANGE_EXCEPTION", connect.CodeOutOfRange, false}
	CodeUnknownBucket       = Code{21, "UNKNOWN_TABLE_OR_BUCKET_EXCEPTION", connect.CodeNotFound, true}
	CodeNotEnoughReplicas   = Code{29, "NOT_ENOUGH_REPLICAS_EXCEPTION", connect.CodeUnavailable, true}
	CodeOutOfOrderSequence  = Code{31, "OUT_OF_ORDER_SEQUENCE_EXCEPTION", connect.CodeFailedPrecondition, false}
	CodeLogStorage          = Code{10, "LOG_STORAGE_EXCEPTION", connect.CodeInternal, false}
	CodeRecordTooLarge      = Code{13, "RECORD_TOO_LARGE_EXCEPTION", connect.CodeInvalidArgument, false}
	CodeInvalidTargetColumn = Code{35, "INVALID_TARGET_COLUMN", connect.CodeInvalidArgument, false}
	CodeDeletionDisabled    = Code{57, "DELETION_DISABLED_EXCEPTION", connect.CodeFailedPrecondition, false}
	CodeKvStorage           = Code{11, "KV_STORAGE_EXCEPTION", connect.CodeInternal, false}
	CodeFencedLeaderEpoch   = Code{24, "FENCED_LEADER_EPOCH_EXCEPTION", connect.CodeFailedPrecondition, true}
	CodeTooManyScanners     = Code{69, "TOO_MANY_SCANNERS", connect.CodeResourceExhausted, false}
	// CodeCorruptRecord: stored data cannot be served (a fetch). Fluss marks
	// it retriable, since another replica may serve it; with one replica
	// (no replication yet) retrying gets the same answer, so it is not. The
	// bucket result's next_offset says where a consumer skipping it goes on.
	CodeCorruptRecord = Code{14, "CORRUPT_RECORD_EXCEPTION", connect.CodeDataLoss, false}
	// An ISR change refused by the coordinator (AdjustISR): the leader
	// waits for its metadata.
	CodeInvalidUpdateVersion = Code{22, "INVALID_UPDATE_VERSION_EXCEPTION", connect.CodeFailedPrecondition, false}
	CodeIneligibleReplica    = Code{55, "INELIGIBLE_REPLICA_EXCEPTION", connect.CodeFailedPrecondition, false}
	// A lake table's Paimon table exists with another schema or data.
	CodeLakeTableExists = Code{54, "LAKE_TABLE_ALREADY_EXIST", connect.CodeAlreadyExists, false}
	// Strom's own codes start at 1000.
	CodeNotReady      = Code{1000, "NODE_NOT_READY", connect.CodeUnavailable, true}
	CodeLimitExceeded = Code{1001, "LIMIT_EXCEEDED", connect.CodeResourceExhausted, false}
	// CodeRemoteUnavailable: remote storage (remote.data.dir) did not
	// answer; a fetch below the local log start may be retried.
	CodeRemoteUnavailable = Code{1002, "REMOTE_STORAGE_UNAVAILABLE", connect.CodeUnavailable, true}
	// CodeKvRebuilding: the bucket's KV store failed a checksum (a damaged
	// SST) and is being rebuilt from the log or a snapshot; a lookup may
	// be retried (nothing from the damaged store is served).
	CodeKvRebuilding = Code{1003, "KV_REBUILDING", connect.CodeUnavailable, true}
)

// ErrNotReady: the node is starting (catching up with the metadata) or
// stopping, and serves no API call. Retriable.
var ErrNotReady = errors.New("rpc: node is not ready (starting or stopping); retry")

// ErrLimitExceeded: a request goes over a limit of the node's
// configuration; the error names the limit and the key that raises it.
var ErrLimitExceeded = errors.New("rpc: limit exceeded")

// ErrTooManyScanners: the bucket or the node has as many ScanKv scanners
// open as kv.scanner.max-per-bucket or kv.scanner.max-per-server allows
// (Fluss's TOO_MANY_SCANNERS). Scanners close at their end, on close, or
// after kv.scanner.ttl unused.
var ErrTooManyScanners = errors.New("rpc: too many scanners")

// LeaderHint names the node a call should have gone to: a bucket's leader
// (with replica.ErrNotLeader) or the coordinator (with
// coordinator.ErrNotCoordinator). Error and Detail put the node in the
// ErrorDetail, so a client can send there at once.
type LeaderHint struct {
	// Err is the error hinted at; errors.Is sees through to it.
	Err error
	// Leader is the node id, meaningful when Address is set.
	Leader int32
	// Address is the node's API address; "" when no leader is known.
	Address string
}

func (e *LeaderHint) Error() string {
	if e.Address == "" {
		return e.Err.Error() + " (no leader is known)"
	}
	return fmt.Sprintf("%v (the leader is node %d at %s)", e.Err, e.Leader, e.Address)
}

func (e *LeaderHint) Unwrap() error { return e.Err }

// sentinels maps each domain sentinel to its code; the first match wins.
var sentinels = []struct {
	err  error
	code Code
}{
	{catalog.ErrDatabaseNotExist, CodeDatabaseNotExist},
	{catalog.ErrDatabaseNotEmpty, CodeDatabaseNotEmpty},
	{catalog.ErrDatabaseExists, CodeDatabaseExists},
	{catalog.ErrTableNotExist, CodeTableNotExist},
	{catalog.ErrTableExists, CodeTableExists},
	{paimon.ErrTableExists, CodeLakeTableExists},
	{paimon.ErrUnsupported, CodeInvalidTable},
	{catalog.ErrCorrupt, CodeStorage},
	{catalog.ErrSchemaNotExist, CodeSchemaNotExist},
	{coordinator.ErrNotCoordinator, CodeNotCoordinator},
	{coordinator.ErrNotEnoughServers, CodeInvalidReplication},
	// The log's first: a node's FENCED_LEADER_EPOCH is rebuilt (ErrorOf) as the
	// log's sentinel, which a follower's fetcher checks for a bucket's error.
	{log.ErrFencedLeaderEpoch, CodeFencedLeaderEpoch},
	{coordinator.ErrFencedLeaderEpoch, CodeFencedLeaderEpoch},
	{coordinator.ErrInvalidUpdateVersion, CodeInvalidUpdateVersion},
	{coordinator.ErrIneligibleReplica, CodeIneligibleReplica},
	{coordinator.ErrInvalidManifest, CodeStorage},
	{coordinator.ErrInvalidKvSnapshots, CodeStorage},
	{remote.ErrUnavailable, CodeRemoteUnavailable},
	{remote.ErrNotFound, CodeLogStorage},
	{ErrNotReady, CodeNotReady},
	{ErrLimitExceeded, CodeLimitExceeded},
	{ErrTooManyScanners, CodeTooManyScanners},
	{raftmeta.ErrNotLeader, CodeNotCoordinator},
	{log.ErrCorruptRecord, CodeCorruptRecord}, // before ErrCorruptBatch, which it may wrap
	{record.ErrCorruptBatch, CodeCorruptMessage},
	{replica.ErrNotLeader, CodeNotLeader},
	{replica.ErrUnknownBucket, CodeUnknownBucket},
	{replica.ErrClosed, CodeUnknownBucket},
	{replica.ErrNotEnoughReplicas, CodeNotEnoughReplicas},
	{log.ErrOffsetOutOfRange, CodeOffsetOutOfRange},
	{log.ErrOutOfOrderSequence, CodeOutOfOrderSequence},
	{log.ErrRecordTooLarge, CodeRecordTooLarge},
	{log.ErrClosed, CodeUnknownBucket},
	{log.ErrCorruptSegment, CodeLogStorage},
	{kv.ErrDeletionDisabled, CodeDeletionDisabled},
	{kv.ErrInvalidRecord, CodeInvalidTable},
	{kv.ErrPartialUpdateUnsupported, CodeInvalidTargetColumn},
	{kv.ErrSchemaMismatch, CodeSchemaNotExist},
	{kv.ErrClosed, CodeUnknownBucket},
	{kv.ErrStoreCorrupt, CodeKvRebuilding},
	{kv.ErrAheadOfLog, CodeKvStorage},
	{kv.ErrTruncateBelowFlushed, CodeKvStorage},
	{kv.ErrCorrupt, CodeKvStorage},
	{replica.ErrNotKV, CodeInvalidTable},
	{raftmeta.ErrStopped, CodeNotCoordinator},
	{context.DeadlineExceeded, CodeRequestTimeout},
	{context.Canceled, CodeCanceled},
}

// CodeOf returns the code for err and, for a validation error, the field
// it names.
func CodeOf(err error) (Code, string) {
	var inv *record.InvalidError
	if errors.As(err, &inv) {
		switch {
		case inv.Field == "database":
			return CodeInvalidDatabase, inv.Field
		case strings.HasPrefix(inv.Field, "properties."), strings.HasPrefix(inv.Field, "options."):
			return CodeInvalidConfigOption, inv.Field
		}
		return CodeInvalidTable, inv.Field
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code, ""
		}
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return Code{-1, "UNKNOWN_SERVER_ERROR", ce.Code(), false}, ""
	}
	return CodeUnknown, ""
}

// Error converts a domain error to the Connect error sent on the wire: the
// Connect code, the error text, and an ErrorDetail with the Strom code. It
// returns nil for nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	code, d := detailOf(err)
	ce := connect.NewError(code.Connect, err)
	if detail, derr := connect.NewErrorDetail(d); derr == nil {
		ce.AddDetail(detail)
	}
	return ce
}

// Detail is the ErrorDetail of err, message included, for errors reported
// per bucket inside a successful response.
func Detail(err error) *stromv1.ErrorDetail {
	_, d := detailOf(err)
	d.Message = err.Error()
	return d
}

// detailOf is err's code and its ErrorDetail, without the message.
func detailOf(err error) (Code, *stromv1.ErrorDetail) {
	code, field := CodeOf(err)
	d := &stromv1.ErrorDetail{Code: code.Num, Name: code.Name, Retriable: code.Retriable, Field: field}
	if h, ok := errors.AsType[*LeaderHint](err); ok {
		d.LeaderId, d.LeaderAddress = h.Leader, h.Address
	}
	return code, d
}

// ReadyInterceptor refuses every call with ErrNotReady while ready reports
// false, so no answer is given from metadata that is still being replayed.
func ReadyInterceptor(ready func() bool) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if !ready() {
				return nil, ErrNotReady
			}
			return next(ctx, req)
		}
	}
}

// ErrorInterceptor converts every error a handler returns with Error, so
// handlers simply return domain errors.
func ErrorInterceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			resp, err := next(ctx, req)
			if err == nil {
				return resp, nil
			}
			var ce *connect.Error
			if errors.As(err, &ce) && len(ce.Details()) > 0 {
				return resp, err // already mapped
			}
			return resp, Error(err)
		}
	}
}

// RemoteError is a domain error another node returned, rebuilt from its
// ErrorDetail (node-to-node calls): errors.Is sees the sentinel of its code.
type RemoteError struct {
	// Sentinel is the first domain sentinel of the code; nil when the code
	// has none.
	Sentinel error
	// Detail is the error as the other node sent it.
	Detail *stromv1.ErrorDetail
}

func (e *RemoteError) Error() string { return e.Detail.Message }

func (e *RemoteError) Unwrap() error { return e.Sentinel }

// ErrorOf is the error d stands for (nil for nil): the inverse of Detail,
// for node-to-node calls.
func ErrorOf(d *stromv1.ErrorDetail) error {
	if d == nil {
		return nil
	}
	e := &RemoteError{Detail: d}
	for _, s := range sentinels {
		if s.code.Num == d.Code && s.code.Name == d.Name {
			e.Sentinel = s.err
			break
		}
	}
	return e
}

// RemoteErrorOf is the error of a call to another node: ErrorOf its
// ErrorDetail when the node answered with one, else err as it is.
func RemoteErrorOf(err error) error {
	ce, ok := errors.AsType[*connect.Error](err)
	if !ok {
		return err
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if ed, ok := v.(*stromv1.ErrorDetail); ok {
				if ed.Message == "" {
					ed.Message = ce.Message()
				}
				return ErrorOf(ed)
			}
		}
	}
	return err
}
