package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"strom/client"
	"strom/record"
)

// The commands of primary-key tables: put, delete, lookup, scan.

func newPutCmd(g *globals) *cobra.Command {
	var (
		jsonRow, file string
		columns       []string
	)
	cmd := &cobra.Command{
		Use:   "put DB.TABLE (--json '{...}' | --file rows.jsonl)",
		Short: "Upsert rows of a primary-key table (JSON objects, one per line)",
		Example: `  strom put shop.customers --json '{"cust_key": 1, "name": "Ada"}'
  strom put shop.customers --file customers.jsonl
  strom put shop.customers --columns cust_key,balance --json '{"cust_key": 1, "balance": "9.50"}'`,
		Args: exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			var in io.Reader
			switch {
			case jsonRow != "" && file != "":
				return fmt.Errorf("give --json or --file, not both")
			case jsonRow != "":
				in = strings.NewReader(jsonRow)
			case file != "":
				f, err := os.Open(file)
				if err != nil {
					return fmt.Errorf("--file: %w", err)
				}
				defer f.Close()
				in = f
			default:
				in = cmd.InOrStdin()
			}
			return g.callLong(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				var opts []client.WriterOption
				schema := t.Schema()
				if len(columns) > 0 {
					opts = append(opts, client.TargetColumns(columns...))
					schema = nullableExcept(schema, columns)
				}
				w, err := t.NewUpsertWriter(ctx, opts...)
				if err != nil {
					return err
				}
				start := time.Now()
				rows, err := sendRows(cmd, in, "json", false, schema, "put",
					func(row record.Row) *client.Future { return w.Upsert(ctx, row) }, func() error { return w.Close(ctx) })
				if err != nil {
					return err
				}
				fmt.Fprintf(g.out, "put %d rows into %s.%s in %s\n", rows, db, name, time.Since(start).Round(time.Millisecond))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&jsonRow, "json", "", "one row as a JSON object")
	cmd.Flags().StringVar(&file, "file", "", "a file of JSON objects, one per line (default: stdin)")
	cmd.Flags().StringSliceVar(&columns, "columns", nil, "partial update: only these columns (with the primary key) are set")
	return cmd
}

// isDone reports whether f has completed (failed at once, or already sent).
func isDone(f *client.Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

// nullableExcept makes every column but keep nullable: the schema JSON rows
// of a partial update are read with.
func nullableExcept(s record.Schema, keep []string) record.Schema {
	out := s
	out.Columns = append([]record.Column(nil), s.Columns...)
	for i, c := range out.Columns {
		found := false
		for _, k := range keep {
			found = found || k == c.Name
		}
		if !found {
			out.Columns[i].Type = c.Type.WithNullable(true)
		}
	}
	return out
}

// parseKey reads "col=value[,col=value]" into values of the named columns,
// in the order of want (the primary key, or a prefix of it).
func parseKey(s record.Schema, spec string) (names []string, values map[string]any, err error) {
	values = map[string]any{}
	for _, part := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, nil, fmt.Errorf("--key %q: want col=value[,col=value]", spec)
		}
		c, _, found := s.Column(k)
		if !found {
			return nil, nil, fmt.Errorf("--key: %q is not a column; columns are %s", k, strings.Join(s.ColumnNames(), ", "))
		}
		if _, dup := values[k]; dup {
			return nil, nil, fmt.Errorf("--key: column %q given twice", k)
		}
		val, err := record.ParseValue(c.Type.WithNullable(false), strings.TrimSpace(v))
		if err != nil {
			return nil, nil, fmt.Errorf("--key: column %q: %w", k, err)
		}
		names = append(names, k)
		values[k] = val
	}
	return names, values, nil
}

// keyValues orders values by cols; ok is false when some column is missing.
func keyValues(cols []string, values map[string]any) (record.Row, bool) {
	out := make(record.Row, 0, len(cols))
	for _, c := range cols {
		v, ok := values[c]
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	return out, len(values) == len(cols)
}

func newDeleteCmd(g *globals) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:     "delete DB.TABLE --key col=value[,col=value]",
		Short:   "Delete the row with a primary key",
		Example: `  strom delete shop.customers --key cust_key=1`,
		Args:    exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.callWithKey(cmd, args[0], key, func(ctx context.Context, t *client.Table, values map[string]any) error {
				s := t.Schema()
				if _, ok := keyValues(s.PrimaryKey, values); !ok {
					return fmt.Errorf("--key: give exactly the primary key: %s", strings.Join(s.PrimaryKey, ", "))
				}
				row := make(record.Row, len(s.Columns))
				for i, col := range s.Columns {
					row[i] = values[col.Name]
				}
				w, err := t.NewUpsertWriter(ctx)
				if err != nil {
					return err
				}
				f := w.Delete(ctx, row)
				if err := w.Close(ctx); err != nil {
					return err
				}
				if _, _, err := f.Wait(ctx); err != nil {
					return err
				}
				fmt.Fprintf(g.out, "deleted %s from %s\n", key, args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the primary key: col=value[,col=value]")
	return cmd
}

// callWithKey runs fn on the table at path with the column values of a
// --key col=value[,col=value] flag (required).
func (g *globals) callWithKey(cmd *cobra.Command, path, key string, fn func(ctx context.Context, t *client.Table, values map[string]any) error) error {
	db, name, err := record.ParseTablePath(path)
	if err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("--key is required, e.g. --key id=1")
	}
	return g.call(cmd, func(ctx context.Context, c *client.Client) error {
		t, err := c.Table(ctx, db, name)
		if err != nil {
			return err
		}
		_, values, err := parseKey(t.Schema(), key)
		if err != nil {
			return err
		}
		return fn(ctx, t, values)
	})
}

func newLookupCmd(g *globals) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "lookup DB.TABLE --key col=value[,col=value]",
		Short: "Look a row up by primary key (a bucket-key prefix of it does a prefix lookup)",
		Example: `  strom lookup shop.customers --key cust_key=1
  strom lookup shop.orders --key region=eu --output json`,
		Args: exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.callWithKey(cmd, args[0], key, func(ctx context.Context, t *client.Table, values map[string]any) error {
				s := t.Schema()
				l, err := t.NewLookuper()
				if err != nil {
					return err
				}
				var rows []record.Row
				if k, ok := keyValues(s.PrimaryKey, values); ok {
					found, err := l.Lookup(ctx, k)
					if err != nil {
						return err
					}
					if found[0] != nil {
						rows = found
					}
				} else if k, ok := keyValues(t.Info().GetDescriptor_().GetBucketKeys(), values); ok {
					if rows, err = l.PrefixLookup(ctx, k); err != nil {
						return err
					}
				} else {
					return fmt.Errorf("--key: give the primary key (%s) or, for a prefix lookup, the bucket key (%s)",
						strings.Join(s.PrimaryKey, ", "), strings.Join(t.Info().GetDescriptor_().GetBucketKeys(), ", "))
				}
				return printRows(g, s, rows)
			})
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the primary key, or the bucket key for a prefix lookup: col=value[,col=value]")
	return cmd
}

func newScanCmd(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "scan DB.TABLE [--limit N]",
		Short: "Read the current rows of a primary-key table (a consistent snapshot of each bucket)",
		Args:  exactArgs(1, "DB.TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, name, err := record.ParseTablePath(args[0])
			if err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("--limit: must be ≥ 0, got %d", limit)
			}
			return g.callLong(cmd, func(ctx context.Context, c *client.Client) error {
				t, err := c.Table(ctx, db, name)
				if err != nil {
					return err
				}
				var rows []record.Row
				for b := int32(0); b < t.Buckets(); b++ {
					left := 0
					if limit > 0 {
						if left = limit - len(rows); left == 0 {
							break
						}
					}
					got, err := t.Scan(ctx, b, left)
					if err != nil {
						return err
					}
					rows = append(rows, got...)
				}
				return printRows(g, t.Schema(), rows)
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many rows (0: all)")
	return cmd
}

// printRows prints rows as a table, or one JSON object per line; nothing
// when there are none.
func printRows(g *globals, s record.Schema, rows []record.Row) error {
	if len(rows) == 0 {
		return nil
	}
	if g.output == "json" {
		var buf bytes.Buffer
		for _, r := range rows {
			buf.Write(record.AppendRowJSON(nil, s, r))
			buf.WriteByte('\n')
		}
		_, err := g.out.Write(buf.Bytes())
		return err
	}
	t := newTable(g.out)
	var head []any
	for _, n := range s.ColumnNames() {
		head = append(head, strings.ToUpper(n))
	}
	t.row(head...)
	for _, r := range rows {
		cells := make([]any, len(r))
		for i, v := range r {
			cells[i] = string(record.AppendValueText(nil, s.Columns[i].Type, v))
			if v == nil {
				cells[i] = "NULL"
			}
		}
		t.row(cells...)
	}
	return t.flush()
}
