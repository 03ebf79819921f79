package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// printJSON writes m as the API's JSON (the same shape curl gets), one
// object, followed by a newline.
func printJSON(w io.Writer, m proto.Message) error {
	return printJSONWith[proto.Message](w, m, "", nil)
}

// printJSONWith is printJSON with one more field, key, added to m's object
// after its own: the JSON array of extra (nothing when key is "").
func printJSONWith[M proto.Message](w io.Writer, m proto.Message, key string, extra []M) error {
	opts := protojson.MarshalOptions{EmitDefaultValues: true}
	b, err := opts.Marshal(m)
	if err != nil {
		return err
	}
	if key != "" {
		b = bytes.TrimSuffix(bytes.TrimSpace(b), []byte("}"))
		if bytes.HasSuffix(bytes.TrimSpace(b), []byte("{")) {
			b = fmt.Appendf(b, "%q:[", key)
		} else {
			b = fmt.Appendf(b, ",%q:[", key)
		}
		for i, e := range extra {
			eb, err := opts.Marshal(e)
			if err != nil {
				return err
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, eb...)
		}
		b = append(b, "]}"...)
	}
	// protojson varies its spacing on purpose; json.Indent makes it stable.
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *table { return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

func (t *table) flush() error { return t.tw.Flush() }

func formatMillis(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
