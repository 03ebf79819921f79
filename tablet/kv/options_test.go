package kv

import (
	"errors"
	"strings"
	"testing"

	"strom/record"
)

func TestAggregationsFromTableProperties(t *testing.T) {
	d := record.TableDescriptor{
		Schema: record.Schema{Columns: []record.Column{
			{Name: "k", Type: record.DataType{Root: record.BigInt}},
			{Name: "total", Type: record.DataType{Root: record.BigInt, Nullable: true}},
			{Name: "tags", Type: record.DataType{Root: record.String, Nullable: true}},
		}, PrimaryKey: []string{"k"}},
		Properties:       map[string]string{record.OptMergeEngine: "aggregation"},
		CustomProperties: map[string]string{"fields.total.agg": "sum", "fields.tags.agg": "listagg", "fields.tags.listagg.delimiter": ";", "other": "x"},
	}
	aggs, delims := AggregationsOf(d)
	if aggs["total"] != "sum" || aggs["tags"] != "listagg" || delims["tags"] != ";" || len(aggs) != 2 || len(delims) != 1 {
		t.Fatalf("aggs %v delims %v", aggs, delims)
	}
	if err := CheckTable(d); err != nil {
		t.Fatal(err)
	}
	d.CustomProperties["fields.total.agg"] = "median"
	d.CustomProperties["fields.nope.agg"] = "sum"
	err := CheckTable(d)
	var inv *record.InvalidError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "median") || !strings.Contains(err.Error(), "nope") || strings.Contains(err.Error(), "Config.") {
		t.Fatalf("err = %v", err)
	}
}
