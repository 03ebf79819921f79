package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"strom/client"
	"strom/record"
	stromv1 "strom/rpc/gen/strom/v1"
)

func newProduceCmd(g *globals) *cobra.Command {
	var (
		format, file string
		header       bool
		acks         int
	)
	cmd := &cobra.Command{
		Use:   "produce DB.TABLE",
		Short: "Write rows to a log table from JSON lines or CSV (stdin by default)",
		Example: `  echo '{"user_id": 1, "url": "/home"}' | strom produce demo.clicks
  strom produce demo.clicks --format csv --header --file clicks.csv`,
		Args: exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			if format != "json" && format != "csv" {
				return fmt.Errorf("--format: want json or csv, got %q", format)
			}
			in := cmd.InOrStdin()
			if file != "" {
				f, err := os.Open(file)
				if err != nil {
					return fmt.Errorf("--file: %w", err)
				}
				defer f.Close()
				in = f
			}
			return g.callLong(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				w, err := t.NewAppendWriter(ctx, client.Acks(acks))
				if err != nil {
					return err
				}
				start := time.Now()
				rows, err := sendRows(cmd, in, format, header, t.Schema(), "produced",
					func(row record.Row) *client.Future { return w.Append(ctx, row) }, func() error { return w.Close(ctx) })
				if err != nil {
					return err
				}
				fmt.Fprintf(g.out, "produced %d rows to %s.%s in %s\n", rows, db, name, time.Since(start).Round(time.Millisecond))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "json", "input format: json (one object per line) or csv (columns in table order)")
	cmd.Flags().StringVar(&file, "file", "", "read this file instead of stdin")
	cmd.Flags().BoolVar(&header, "header", false, "csv: the first line names the columns")
	cmd.Flags().IntVar(&acks, "acks", -1, "-1: wait for all in-sync replicas; 1: the leader; 0: no wait")
	return cmd
}

// sendRows reads rows from in and hands each to write, showing progress on
// a terminal, then closes the writer. It returns how many rows it sent.
func sendRows(cmd *cobra.Command, in io.Reader, format string, header bool, s record.Schema, verb string,
	write func(record.Row) *client.Future, closeWriter func() error) (int, error) {
	p := newProgress(cmd.ErrOrStderr(), verb, inputSize(in))
	rows, perr := readRows(in, format, header, s, func(row record.Row, size int) error {
		// A row that does not fit fails at once; others complete later.
		if f := write(row); isDone(f) && f.Err() != nil {
			return f.Err()
		}
		p.add(1, size)
		return nil
	})
	cerr := closeWriter()
	p.done()
	if perr != nil {
		return rows, fmt.Errorf("%w (the %d rows before it were sent)", perr, rows)
	}
	return rows, cerr
}

// readRows parses input rows and hands each to fn with its size in bytes.
// It returns how many rows it handed over.
func readRows(in io.Reader, format string, header bool, s record.Schema, fn func(record.Row, int) error) (int, error) {
	n := 0
	if format == "csv" {
		r := csv.NewReader(in)
		r.FieldsPerRecord = -1
		r.ReuseRecord = true
		order := s
		for line := 1; ; line++ {
			fields, err := r.Read()
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			if err != nil {
				return n, fmt.Errorf("csv: %w", err)
			}
			if header && line == 1 {
				var err error
				if order, err = csvOrder(s, fields); err != nil {
					return n, fmt.Errorf("line 1 (header): %w", err)
				}
				continue
			}
			row, err := record.RowFromCSV(order, fields)
			if err != nil {
				return n, fmt.Errorf("line %d: %w", line, err)
			}
			if header {
				row = reorder(s, order, row)
			}
			size := 0
			for _, f := range fields {
				size += len(f) + 1
			}
			if err := fn(row, size); err != nil {
				return n, fmt.Errorf("line %d: %w", line, err)
			}
			n++
		}
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		row, err := record.RowFromJSON(s, text)
		if err != nil {
			return n, fmt.Errorf("line %d: %w", line, err)
		}
		if err := fn(row, len(text)+1); err != nil {
			return n, fmt.Errorf("line %d: %w", line, err)
		}
		n++
	}
	return n, sc.Err()
}

// csvOrder is the schema of a CSV file's columns, named by its header.
func csvOrder(s record.Schema, names []string) (record.Schema, error) {
	var out record.Schema
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		c, _, ok := s.Column(n)
		if !ok {
			return out, fmt.Errorf("%q is not a column; columns are %s", n, strings.Join(s.ColumnNames(), ", "))
		}
		if seen[n] {
			return out, fmt.Errorf("column %q named twice", n)
		}
		seen[n] = true
		out.Columns = append(out.Columns, c)
	}
	return out, nil
}

// reorder puts a row in the order of order's columns into s's order (absent
// columns are NULL).
func reorder(s, order record.Schema, row record.Row) record.Row {
	out := make(record.Row, len(s.Columns))
	for i, c := range order.Columns {
		if _, j, ok := s.Column(c.Name); ok {
			out[j] = row[i]
		}
	}
	return out
}

func newConsumeCmd(g *globals) *cobra.Command {
	var (
		columns []string
		from    string
		limit   int
		follow  bool
		buckets []int
		skipBad bool
	)
	cmd := &cobra.Command{
		Use:   "consume DB.TABLE",
		Short: "Read rows of a log table (or a primary-key table's changelog)",
		Long: `Read rows of a log table (or a primary-key table's changelog).

A batch that cannot be read (damaged on the node's disk, or not decodable)
stops consume with an error naming the bucket and its offsets. --skip-bad
goes past such batches instead: DATA LOSS. Their records are not printed;
each skip is reported on stderr with the bucket, the offsets and the number
of records lost.`,
		Example: `  strom consume demo.clicks --from earliest
  strom consume demo.clicks --columns user_id,url --output json --follow
  strom consume demo.clicks --skip-bad 2>skipped.txt`,
		Args:        exactArgs(1, "DB.TABLE"),
		Annotations: map[string]string{outputsAnnotation: "table,json,csv"},
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			start, err := parseFrom(from)
			if err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("--limit: must be ≥ 0, got %d", limit)
			}
			run := g.call
			if follow {
				run = g.callLong
			}
			return run(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				opts := []client.ScanOption{client.Columns(columns...)}
				if skipBad {
					opts = append(opts, client.SkipCorrupt())
				}
				sc, err := t.NewLogScanner(opts...)
				if err != nil {
					return err
				}
				if len(buckets) == 0 {
					for b := int32(0); b < t.Buckets(); b++ {
						buckets = append(buckets, int(b))
					}
				}
				for _, b := range buckets {
					if err := sc.Subscribe(ctx, int32(b), start); err != nil {
						return err
					}
				}
				// Without --follow, stop at the end the log had when we began.
				var end map[int32]int64
				if !follow {
					if end, err = t.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{}); err != nil {
						return err
					}
				}
				out := newRowPrinter(g.out, g.output, sc.Schema())
				printed := 0
				for {
					if !follow && caughtUp(sc.Position(), end) {
						return out.flush()
					}
					fs, err := sc.Poll(ctx)
					if err != nil {
						return err
					}
					recs := fs.Records()
					fs.Release()
					for _, f := range fs {
						for _, e := range f.Skipped {
							fmt.Fprintf(cmd.ErrOrStderr(), "strom: skipped bucket %d offsets %d to %d: %d records lost: %v\n",
								e.Bucket, e.Offset, e.NextOffset-1, e.NextOffset-e.Offset, e.Err)
						}
					}
					for _, r := range recs {
						if limit > 0 && printed == limit {
							return out.flush()
						}
						if err := out.print(r); err != nil {
							return err
						}
						printed++
					}
					if err := fs.Errors(); err != nil {
						var ce *client.CorruptBatchError
						if errors.As(err, &ce) {
							return fmt.Errorf("%w (--skip-bad goes past it, losing those records)", err)
						}
						return err
					}
					if limit > 0 && printed == limit {
						return out.flush()
					}
					if err := out.flush(); err != nil {
						return err
					}
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&columns, "columns", nil, "read only these columns (pruned on the server)")
	f.StringVar(&from, "from", "earliest", "where to start: earliest, latest, offset:N or timestamp:RFC3339")
	f.IntVar(&limit, "limit", 0, "stop after this many rows (0: no limit)")
	f.BoolVar(&follow, "follow", false, "keep reading new rows until interrupted")
	f.IntSliceVar(&buckets, "bucket", nil, "read only these buckets (default: all)")
	f.BoolVar(&skipBad, "skip-bad", false, "skip batches that cannot be read, reporting each on stderr: DATA LOSS")
	return cmd
}

func caughtUp(pos, end map[int32]int64) bool {
	for b, o := range pos {
		if o < end[b] {
			return false
		}
	}
	return true
}

func parseFrom(s string) (client.StartOffset, error) {
	switch {
	case s == "earliest":
		return client.Earliest(), nil
	case s == "latest":
		return client.Latest(), nil
	case strings.HasPrefix(s, "offset:"):
		n, err := strconv.ParseInt(strings.TrimPrefix(s, "offset:"), 10, 64)
		if err != nil || n < 0 {
			return client.StartOffset{}, fmt.Errorf("--from %q: want offset:N with N ≥ 0", s)
		}
		return client.AtOffset(n), nil
	case strings.HasPrefix(s, "timestamp:"):
		t, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(s, "timestamp:"))
		if err != nil {
			return client.StartOffset{}, fmt.Errorf("--from %q: want timestamp:RFC3339, e.g. timestamp:2026-11-30T13:45:00Z", s)
		}
		return client.AtTimestamp(t), nil
	}
	return client.StartOffset{}, fmt.Errorf("--from %q: want earliest, latest, offset:N or timestamp:RFC3339", s)
}

// rowPrinter prints scanned rows as a table, JSON lines or CSV.
type rowPrinter struct {
	w      io.Writer
	format string
	schema record.Schema
	tab    *table
	csv    *csv.Writer
	buf    []byte
}

func newRowPrinter(w io.Writer, format string, s record.Schema) *rowPrinter {
	return &rowPrinter{w: w, format: format, schema: s}
}

func (p *rowPrinter) print(r client.ScanRecord) error {
	p.buf = record.AppendRowJSON(p.buf[:0], p.schema, r.Row)
	ts := r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z")
	if p.format == "json" {
		line := p.buf[:len(p.buf)-1]
		if len(p.schema.Columns) > 0 {
			line = append(line, ',')
		}
		line = fmt.Appendf(line, `"_change_type":%q,"_offset":%d,"_timestamp":%q,"_bucket":%d}`+"\n", r.ChangeType.String(), r.Offset, ts, r.Bucket)
		_, err := p.w.Write(line)
		return err
	}
	cells, err := textCells(p.buf, p.schema)
	if err != nil {
		return err
	}
	meta := []string{r.ChangeType.String(), strconv.FormatInt(r.Offset, 10), ts, strconv.Itoa(int(r.Bucket))}
	if p.format == "csv" {
		if p.csv == nil {
			p.csv = csv.NewWriter(p.w)
			if err := p.csv.Write(append(p.schema.ColumnNames(), "_change_type", "_offset", "_timestamp", "_bucket")); err != nil {
				return err
			}
		}
		return p.csv.Write(append(cells, meta...))
	}
	if p.tab == nil {
		p.tab = newTable(p.w)
		head := []any{}
		for _, n := range append(p.schema.ColumnNames(), "_change_type", "_offset", "_timestamp", "_bucket") {
			head = append(head, strings.ToUpper(n))
		}
		p.tab.row(head...)
	}
	row := make([]any, 0, len(cells)+len(meta))
	for _, c := range append(cells, meta...) {
		row = append(row, c)
	}
	p.tab.row(row...)
	return nil
}

func (p *rowPrinter) flush() error {
	if p.csv != nil {
		p.csv.Flush()
		return p.csv.Error()
	}
	if p.tab != nil {
		return p.tab.flush()
	}
	return nil
}

// textCells renders a row's JSON values as plain text, in column order:
// strings without quotes, NULL as empty.
func textCells(rowJSON []byte, s record.Schema) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(rowJSON))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		switch v := obj[c.Name].(type) {
		case nil:
			out[i] = ""
		case string:
			out[i] = v
		default:
			out[i] = fmt.Sprint(v)
		}
	}
	return out, nil
}

func newOffsetsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "offsets DB.TABLE",
		Short: "Show each bucket's earliest and latest (high watermark) offsets",
		Args:  exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			return g.call(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				earliest, err := t.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_EARLIEST, time.Time{})
				if err != nil {
					return err
				}
				latest, err := t.Offsets(ctx, stromv1.OffsetSpec_OFFSET_SPEC_LATEST, time.Time{})
				if err != nil {
					return err
				}
				buckets := make([]int, 0, len(latest))
				for b := range latest {
					buckets = append(buckets, int(b))
				}
				sort.Ints(buckets)
				if g.output == "json" {
					for _, b := range buckets {
						fmt.Fprintf(g.out, `{"bucket":%d,"earliest":%d,"latest":%d}`+"\n", b, earliest[int32(b)], latest[int32(b)])
					}
					return nil
				}
				tw := newTable(g.out)
				tw.row("BUCKET", "EARLIEST", "LATEST")
				for _, b := range buckets {
					tw.row(b, earliest[int32(b)], latest[int32(b)])
				}
				return tw.flush()
			})
		},
	}
}
