package record

import (
	"errors"
	"fmt"
)

// InvalidError is one validation problem, with the offending field named by a
// path into the value that was checked: "schema.columns[2].type",
// "options.table.log.ttl", "primary_key", "database".
//
// Functions that validate report every problem they find at once, as
// errors.Join of *InvalidError; errors.As finds the first, InvalidErrors lists
// them all.
type InvalidError struct {
	// Field is the path of the offending field.
	Field string
	// Reason says what is wrong and, where possible, how to fix it.
	Reason string
}

// Error returns "<field>: <reason>".
func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

// InvalidErrors returns every *InvalidError in err's tree (errors.Join trees
// and %w chains alike), in order; nil if there is none.
func InvalidErrors(err error) []*InvalidError {
	var out []*InvalidError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if ie, ok := err.(*InvalidError); ok {
			out = append(out, ie)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// problems collects validation problems in the order they are found.
type problems struct {
	errs []error
}

func (p *problems) add(field, format string, args ...any) {
	p.errs = append(p.errs, &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// err returns nil when no problem was found and errors.Join of all of them
// otherwise (even of one, so callers always see the same shape).
func (p *problems) err() error {
	return errors.Join(p.errs...)
}
