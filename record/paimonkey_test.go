package record

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The Paimon keys and buckets of fluss/paimon/testdata/keys.jsonl, which
// Fluss 0.9.1's own PaimonKeyEncoder and PaimonBucketingFunction made
// (fluss/paimon/javacheck PaimonCheck keys): BIGINT, INT, STRING (inline,
// 8 bytes and longer), DECIMAL(15, 2), and two-column keys.
func TestPaimonKeyVectors(t *testing.T) {
	f, err := os.Open("../fluss/paimon/testdata/keys.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cols, err := ParseColumns("a BIGINT, b INT, s STRING, d DECIMAL(15, 2)")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var v struct {
			Keys    string         `json:"keys"`
			Row     []any          `json:"row"`
			Key     string         `json:"key"`
			Buckets map[string]int `json:"buckets"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		unscaled, _ := new(big.Int).SetString(strings.Replace(v.Row[3].(string), ".", "", 1), 10)
		dec, err := NewDecimal(unscaled, 15, 2)
		if err != nil {
			t.Fatal(err)
		}
		row := Row{int64(v.Row[0].(float64)), int32(v.Row[1].(float64)), v.Row[2].(string), dec}
		k, err := NewPaimonKeyCodec(cols, strings.Split(v.Keys, ","))
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.AppendRow(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(got) != v.Key {
			t.Errorf("keys %s of %v: %x, want %s", v.Keys, v.Row, got, v.Key)
		}
		if err := k.CheckKey(got); err != nil {
			t.Errorf("CheckKey(%x): %v", got, err)
		}
		for nb, want := range v.Buckets {
			n, _ := strconv.Atoi(nb)
			if b := PaimonBucketOf(got, n); b != want {
				t.Errorf("keys %s of %v: bucket of %d: %d, want %d", v.Keys, v.Row, n, b, want)
			}
		}
	}
	if n != 30 {
		t.Fatalf("%d vectors, want 30", n)
	}
}

func TestPrimaryKeyEncoder(t *testing.T) {
	cols, _ := ParseColumns("a BIGINT NOT NULL, b INT NOT NULL")
	for _, tc := range []struct {
		props  map[string]string
		bucket []string
		paimon bool
	}{
		{nil, []string{"a", "b"}, false},
		{map[string]string{OptDatalakeFormat: "paimon"}, []string{"a", "b"}, true},
		{map[string]string{OptDatalakeFormat: "paimon"}, []string{"a"}, true},
		{map[string]string{OptDatalakeFormat: "paimon", OptKvFormatVersion: "2"}, []string{"a", "b"}, true},
		{map[string]string{OptDatalakeFormat: "paimon", OptKvFormatVersion: "2"}, []string{"a"}, false},
		{map[string]string{OptDatalakeFormat: "lance"}, []string{"a", "b"}, false},
	} {
		d := TableDescriptor{Schema: Schema{Columns: cols, PrimaryKey: []string{"a", "b"}}, BucketKeys: tc.bucket, Properties: tc.props}
		e, err := PrimaryKeyEncoder(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := e.(*PaimonKeyCodec); ok != tc.paimon {
			t.Errorf("%v bucket %v: Paimon %v, want %v", tc.props, tc.bucket, ok, tc.paimon)
		}
	}
}
