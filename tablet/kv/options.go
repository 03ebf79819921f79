package kv

import (
	"errors"
	"strings"

	"strom/record"
)

// Fluss configures the aggregation merge engine per column with table
// properties outside the table.* namespace, which record keeps as custom
// properties: fields.<col>.agg = <function> and
// fields.<col>.listagg.delimiter = <delimiter>.
const (
	fieldsPrefix    = "fields."
	aggSuffix       = ".agg"
	listaggDelimSfx = ".listagg.delimiter"
)

// AggregationsOf reads the per-column aggregate functions and listagg
// delimiters of a table from its custom properties, for Config.
func AggregationsOf(d record.TableDescriptor) (aggs, delimiters map[string]string) {
	for k, v := range d.CustomProperties {
		rest, ok := strings.CutPrefix(k, fieldsPrefix)
		if !ok {
			continue
		}
		if col, ok := strings.CutSuffix(rest, listaggDelimSfx); ok {
			if delimiters == nil {
				delimiters = map[string]string{}
			}
			delimiters[col] = v
		} else if col, ok := strings.CutSuffix(rest, aggSuffix); ok {
			if aggs == nil {
				aggs = map[string]string{}
			}
			aggs[col] = v
		}
	}
	return aggs, delimiters
}

// CheckTable reports, without opening anything, every reason a KV tablet
// could not serve the primary-key table d: its merge engine and options, and
// its aggregate functions (AggregationsOf). The errors are
// *record.InvalidError naming the option.
func CheckTable(d record.TableDescriptor) error {
	aggs, delims := AggregationsOf(d)
	_, err := newEngine(Config{Table: d, Aggregations: aggs, ListaggDelimiters: delims})
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range flatten(err) {
		msg := e.Error()
		field := "properties"
		for _, f := range []string{"Aggregations", "ListaggDelimiters"} {
			if strings.Contains(msg, "Config."+f+": ") {
				field = "custom_properties"
			}
		}
		if rest, ok := strings.CutPrefix(msg, "kv: Config."); ok {
			if i := strings.Index(rest, ": "); i >= 0 {
				msg = rest[i+2:]
			}
		}
		out = append(out, &record.InvalidError{Field: field, Reason: msg})
	}
	return errors.Join(out...)
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
