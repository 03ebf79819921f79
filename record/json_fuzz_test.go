package record

import (
	"bytes"
	"os"
	"testing"
)

// FuzzRowFromJSON: RowFromJSON never panics; a row it accepts passes
// CheckRow, and its JSON reads back as the same row and the same bytes.
func FuzzRowFromJSON(f *testing.F) {
	s := everyTypeSchema(f)
	if golden, err := os.ReadFile(rowsGolden); err == nil {
		for _, line := range bytes.Split(golden, []byte("\n")) {
			f.Add(line)
		}
	}
	for _, seed := range []string{
		`{"id":1}`, `{"id":"1"}`, `{"id":1,"c_bigint":"-5","c_dec":1e2,"c_ltz3":"2026-11-30T13:45:00+01:00"}`,
		`{"id":1,"c_ts6":"2026-11-30 13:45:00.1"}`, `{"id":1,"c_float":"NaN","c_double":-0}`, `{"id":1,"id":2}`,
		`{"x":1}`, `[]`, `{"id":1,"c_bytes":"AQI"}`, `{"id":1,"c_string":"\ud800"}`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := RowFromJSON(s, data)
		if err != nil {
			if len(InvalidErrors(err)) == 0 {
				t.Fatalf("RowFromJSON(%q) error %v has no *InvalidError", data, err)
			}
			return
		}
		if err := s.CheckRow(r); err != nil {
			t.Fatalf("RowFromJSON(%q) = %v, which fails CheckRow: %v", data, r, err)
		}
		js := AppendRowJSON(nil, s, r)
		back, err := RowFromJSON(s, js)
		if err != nil || !back.Equal(r) {
			t.Fatalf("RowFromJSON(%q) = %v; its JSON %s reads back as %v, %v", data, r, js, back, err)
		}
		if again := AppendRowJSON(nil, s, back); !bytes.Equal(again, js) {
			t.Fatalf("JSON not stable: %s then %s", js, again)
		}
	})
}
