package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rows, bytes int
		total       int64
		want        string
	}{
		{"unknown size", 5000, 2_000_000, 0, "produced 5000 rows  2500 rows/s  1.00 MB/s"},
		{"a quarter", 5000, 2_000_000, 8_000_000, "produced [======>                 ]  25%  5000 rows  2500 rows/s  1.00 MB/s"},
		{"all", 20000, 8_000_000, 8_000_000, "produced [========================] 100%  20000 rows  10000 rows/s  4.00 MB/s"},
		{"more than the size", 20000, 9_000_000, 8_000_000, "produced [========================] 100%  20000 rows  10000 rows/s  4.50 MB/s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &progress{verb: "produced", rows: tc.rows, bytes: tc.bytes, total: tc.total}
			if got := p.line(2 * time.Second); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A regular file's size is known (--file, or stdin redirected from a
// file); a pipe's is not.
func TestInputSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.json")
	if err := os.WriteFile(path, []byte(`{"id": 1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := inputSize(f); n != 10 {
		t.Errorf("file: %d, want 10", n)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if n := inputSize(r); n != 0 {
		t.Errorf("pipe: %d, want 0", n)
	}
	if n := inputSize(strings.NewReader("x")); n != 0 {
		t.Errorf("reader: %d, want 0", n)
	}
}
