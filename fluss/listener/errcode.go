package listener

import (
	"errors"

	"strom/fluss/protocol"
	"strom/rpc"
)

// Error is an error a handler returns to answer with a given Fluss code
// and message, for problems of the request itself that no Strom sentinel
// names (e.g. a missing field).
type Error struct {
	Code    protocol.ErrorCode
	Message string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

// overrides are the Strom codes whose numbers Fluss 0.9.1 does not have
// (rpc/errcode.go's codes are Fluss's numbers where Fluss has the error),
// mapped to the Fluss error a 0.9.1 client handles the same way.
var overrides = map[int32]protocol.ErrorCode{
	rpc.CodeNotCoordinator.Num:  protocol.InvalidCoordinatorException, // Fluss ≥ 0.10's NOT_COORDINATOR_LEADER
	rpc.CodeNotReady.Num:        protocol.LeaderNotAvailableException, // retriable, as NODE_NOT_READY is
	rpc.CodeTooManyScanners.Num: protocol.UnknownServerError,
	// A reply past one of the node's byte caps (kv.lookup.max-bytes,
	// kv.prefix-lookup.max-bytes; the only LIMIT_EXCEEDED a Fluss key meets):
	// Fluss's error for too many bytes, which its client does not retry.
	rpc.CodeLimitExceeded.Num:     protocol.RecordTooLargeException,
	rpc.CodeRemoteUnavailable.Num: protocol.LogStorageException,
	rpc.CodeKvRebuilding.Num:      protocol.LeaderNotAvailableException, // retriable: the KV is rebuilt meanwhile
}

// errorCode is the Fluss error code a handler's error answers with, and
// its message. This is the one place Strom's errors become Fluss's: a
// domain error (or one another node returned over the Connect API, which
// rpc.RemoteErrorOf rebuilds) gets rpc.CodeOf's code, which is Fluss's
// number wherever Fluss 0.9.1 has the error; the rest go through
// overrides, and anything else is UNKNOWN_SERVER_ERROR. The message is the
// error's text, prefixed with Strom's code name where that is not the
// Fluss name, so nothing of the cause is lost.
func errorCode(err error) (protocol.ErrorCode, string) {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code, e.Message
	}
	err = rpc.RemoteErrorOf(err)
	code, _ := rpc.CodeOf(err)
	fc := protocol.ErrorCode(code.Num)
	if o, ok := overrides[code.Num]; ok {
		fc = o
	} else if fc.DefaultMessage() == "" { // not a Fluss 0.9.1 code
		fc = protocol.UnknownServerError
	}
	msg := err.Error()
	if fc.String() != code.Name {
		msg = code.Name + ": " + msg
	}
	return fc, msg
}
