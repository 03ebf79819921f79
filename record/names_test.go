package record

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateNames(t *testing.T) {
	tests := []struct {
		name string
		want []string // reasons; none for a valid name
	}{
		{"orders", nil},
		{"Orders_2024-v2", nil},
		{"_x", nil},
		{"a__b", nil},
		{strings.Repeat("a", 200), nil},
		{"", []string{"the empty string is not allowed"}},
		{".", []string{`"." is not allowed`}},
		{"..", []string{`".." is not allowed`}},
		{strings.Repeat("a", 201), []string{"201 characters long, more than the maximum 200"}},
		{"db.table", []string{"contains '.'"}},
		{"héllo wörld", []string{"contains 'é', ' ', 'ö'"}},
		{"__internal", []string{`the prefix "__" is reserved`}},
		{"__bad name", []string{"contains ' '", `the prefix "__" is reserved`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for field, validate := range map[string]func(string) error{
				"database": ValidateDatabaseName,
				"table":    ValidateTableName,
			} {
				err := validate(tc.name)
				if len(tc.want) == 0 {
					if err != nil {
						t.Fatalf("%s: %v", field, err)
					}
					continue
				}
				var ie *InvalidError
				if !errors.As(err, &ie) || ie.Field != field {
					t.Fatalf("%s: error %v is not an *InvalidError with Field %q", field, err, field)
				}
				for _, w := range tc.want {
					if !strings.Contains(ie.Reason, w) {
						t.Errorf("%s: %q does not contain %q", field, ie.Reason, w)
					}
				}
			}
		})
	}
}

func TestParseTablePath(t *testing.T) {
	db, table, err := ParseTablePath("fluss.orders")
	if err != nil || db != "fluss" || table != "orders" {
		t.Fatalf("ParseTablePath = %q, %q, %v", db, table, err)
	}
	tests := []struct {
		in     string
		fields []string
	}{
		{"orders", []string{"table_path"}},
		{"", []string{"table_path"}},
		{".orders", []string{"database"}},
		{"db.", []string{"table"}},
		{"a.b.c", []string{"table"}},
		{"__sys.t t", []string{"database", "table"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, _, err := ParseTablePath(tc.in)
			probs := InvalidErrors(err)
			var fields []string
			for _, p := range probs {
				fields = append(fields, p.Field)
			}
			if strings.Join(fields, ",") != strings.Join(tc.fields, ",") {
				t.Fatalf("ParseTablePath(%q) problems in %v, want %v: %v", tc.in, fields, tc.fields, err)
			}
		})
	}
}

func TestInvalidErrors(t *testing.T) {
	if InvalidErrors(nil) != nil {
		t.Fatal("InvalidErrors(nil) != nil")
	}
	a := &InvalidError{Field: "a", Reason: "x"}
	b := &InvalidError{Field: "b", Reason: "y"}
	err := errors.Join(a, fmtWrap(errors.Join(b, errors.New("other"))))
	got := InvalidErrors(err)
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("InvalidErrors = %v", got)
	}
	if a.Error() != "a: x" {
		t.Fatalf("Error() = %q", a.Error())
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func fmtWrap(err error) error { return wrapped{err} }
