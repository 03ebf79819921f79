package record

import (
	"errors"
	"fmt"
	"strings"
)

// MaxNameLength is the longest database or table name, as in Fluss: names
// become directory names ("{db}/{table}-{id}/log-{bucket}"), and 200 leaves
// room within the usual 255-byte limit.
const MaxNameLength = 200

// InternalNamePrefix starts the names Fluss reserves for internal databases
// and tables; a user cannot create a name with it.
const InternalNamePrefix = "__"

// ValidateDatabaseName checks a database name against Fluss's rules (see
// ValidateTableName). The error is an *InvalidError with Field "database".
func ValidateDatabaseName(name string) error { return validateName("database", name) }

// ValidateTableName checks a table name against Fluss's rules: not empty,
// not "." or "..", at most 200 characters, only ASCII letters, digits, '_'
// and '-', and not starting with "__" (reserved for internal tables). The
// error is an *InvalidError with Field "table", naming every rule broken.
func ValidateTableName(name string) error { return validateName("table", name) }

func validateName(field, name string) error {
	var why []string
	switch {
	case name == "":
		why = append(why, "the empty string is not allowed")
	case name == "." || name == "..":
		why = append(why, fmt.Sprintf("%q is not allowed", name))
	default:
		if len(name) > MaxNameLength {
			why = append(why, fmt.Sprintf("it is %d characters long, more than the maximum %d", len(name), MaxNameLength))
		}
		if bad := invalidNameChars(name); bad != "" {
			why = append(why, fmt.Sprintf("it contains %s; only ASCII letters, digits, '_' and '-' are allowed", bad))
		}
		if strings.HasPrefix(name, InternalNamePrefix) {
			why = append(why, fmt.Sprintf("the prefix %q is reserved for internal names", InternalNamePrefix))
		}
	}
	if len(why) == 0 {
		return nil
	}
	shown := name
	if len(shown) > 60 {
		shown = shown[:60] + "..."
	}
	return &InvalidError{Field: field, Reason: fmt.Sprintf("%s name %q is invalid: %s", field, shown, strings.Join(why, "; "))}
}

// invalidNameChars lists the distinct characters of name that a name may not
// contain, quoted, or returns "".
func invalidNameChars(name string) string {
	var bad []string
	seen := map[rune]bool{}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		if !ok && !seen[r] {
			seen[r] = true
			bad = append(bad, fmt.Sprintf("%q", r))
		}
		if len(bad) == 5 {
			bad = append(bad, "...")
			break
		}
	}
	return strings.Join(bad, ", ")
}

// ParseTablePath splits "db.table" and validates both names. Every problem
// is reported, as errors.Join of *InvalidError (Fields "table_path",
// "database", "table").
func ParseTablePath(s string) (db, table string, err error) {
	db, table, ok := strings.Cut(s, ".")
	if !ok {
		return "", "", errors.Join(&InvalidError{Field: "table_path", Reason: fmt.Sprintf("%q is not a table path; write it as <database>.<table>", s)})
	}
	var p problems
	for _, e := range []error{ValidateDatabaseName(db), ValidateTableName(table)} {
		if e != nil {
			p.errs = append(p.errs, e)
		}
	}
	if err := p.err(); err != nil {
		return "", "", err
	}
	return db, table, nil
}
