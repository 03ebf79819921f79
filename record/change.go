package record

import (
	"fmt"
	"strconv"
)

// ChangeType is what a log record means for the table (Fluss's ChangeType).
// Its value is the byte the change-type vector of an ARROW batch and the
// record header of a COMPACTED batch hold.
type ChangeType int8

// The change types, with Fluss's byte values.
const (
	// AppendOnly (+A) is a row of a log table.
	AppendOnly ChangeType = 0
	// Insert (+I) is a new row of a primary-key table.
	Insert ChangeType = 1
	// UpdateBefore (-U) is the old image of an updated row.
	UpdateBefore ChangeType = 2
	// UpdateAfter (+U) is the new image of an updated row.
	UpdateAfter ChangeType = 3
	// Delete (-D) is a deleted row, with its last image.
	Delete ChangeType = 4
)

var changeTypeNames = [...]string{"+A", "+I", "-U", "+U", "-D"}

// Valid reports whether c is one of the five change types.
func (c ChangeType) Valid() bool { return c >= AppendOnly && c <= Delete }

// String returns Fluss's short string: "+A", "+I", "-U", "+U", "-D".
func (c ChangeType) String() string {
	if !c.Valid() {
		return "ChangeType(" + strconv.Itoa(int(c)) + ")"
	}
	return changeTypeNames[c]
}

// ParseChangeType reads a change type's short string ("+A", "+I", "-U", "+U",
// "-D"). The error is an *InvalidError with Field "change_type".
func ParseChangeType(s string) (ChangeType, error) {
	for i, n := range changeTypeNames {
		if n == s {
			return ChangeType(i), nil
		}
	}
	return 0, &InvalidError{Field: "change_type", Reason: fmt.Sprintf("%q is not a change type; use +A, +I, -U, +U or -D", s)}
}
