package main

import (
	"strings"

	"strom/client"
	"strom/record"
)

// The data of scripts/peerbench/FlussBench.java, generated the same way
// from the same seeds, so both systems get identical rows.

// words is FlussBench's WORDS (Strom's cli/bench.go vocabulary).
var words = strings.Fields(`stream table bucket offset leader replica commit arrow column pruning
changelog snapshot segment index watermark writer reader fetch produce schema partition lake tier
remote merge engine lookup prefix scan upsert delete insert update coordinator tablet server node
cluster metadata session watch epoch fence quorum batch record compress decompress zstd frame`)

// genString is FlussBench.genString: words joined by spaces, cut to n bytes.
func genString(rng *splittable, n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.nextIntN(int32(len(words)))])
	}
	return b.String()[:n]
}

// pruningTypes cycle over the 20 columns c00..c19 (Strom's pruningSchema()).
var pruningTypes = [4]record.DataType{client.Int(), client.BigInt(), client.String(), client.String()}

func pruningColumnNames() []string {
	names := make([]string, 20)
	for i := range names {
		names[i] = "c" + string(rune('0'+i/10)) + string(rune('0'+i%10))
	}
	return names
}

// pruningStrLen is FlussBench.pruningStrLen: (rowBytes - 8 per fixed column) / string columns.
func pruningStrLen(rowBytes int) int {
	fixed, strCols := 0, 0
	for i := 0; i < 20; i++ {
		if pruningTypes[i%4].Root == record.String {
			strCols++
		} else {
			fixed += 8
		}
	}
	return max(1, (rowBytes-fixed)/strCols)
}

// pruningPayload is FlussBench.pruningPayload: payload bytes of the first
// cols columns (INT 4, BIGINT 8, STRING its length).
func pruningPayload(cols, strLen int) int64 {
	var b int64
	for i := 0; i < cols; i++ {
		switch pruningTypes[i%4].Root {
		case record.Int:
			b += 4
		case record.BigInt:
			b += 8
		default:
			b += int64(strLen)
		}
	}
	return b
}

// pruningRow is FlussBench.pruningRow: INT uniform below 1e5, BIGINT below
// 1e9, text strings of strLen bytes, drawn in column order.
func pruningRow(rng *splittable, strLen int) record.Row {
	r := make(record.Row, 20)
	for i := range r {
		switch pruningTypes[i%4].Root {
		case record.Int:
			r[i] = rng.nextIntN(100000)
		case record.BigInt:
			r[i] = rng.nextLongN(1_000_000_000)
		default:
			r[i] = genString(rng, strLen)
		}
	}
	return r
}

// kvSchema is FlussBench.kvSchema: Strom's PK bench table.
func kvSchema() *client.SchemaBuilder {
	return client.NewSchema().Column("id", client.BigInt()).Column("a", client.Int()).
		Column("s1", client.String()).Column("s2", client.String()).PrimaryKey("id")
}

// wideSchema is FlussBench.wideSchema: the Fluss user's workload, 8
// columns (id BIGINT primary key, a INT, b BIGINT, c INT, s1..s4 STRING).
func wideSchema() *client.SchemaBuilder {
	return client.NewSchema().Column("id", client.BigInt()).Column("a", client.Int()).
		Column("b", client.BigInt()).Column("c", client.Int()).
		Column("s1", client.String()).Column("s2", client.String()).
		Column("s3", client.String()).Column("s4", client.String()).PrimaryKey("id")
}

// wideStrLen is FlussBench.wideStrLen: the string length that makes a wide
// row rowBytes of payload (24 bytes of fixed columns, 4 strings).
func wideStrLen(rowBytes int) int { return max(1, (rowBytes-24)/4) }

// wideRows is FlussBench.wideRows: n rows of wideSchema, keys drawn below
// 1e9 (so a few repeat: upserts of an earlier key).
func wideRows(n, strLen int, seed int64) []record.Row {
	rng := newSplittable(seed)
	rows := make([]record.Row, n)
	for i := range rows {
		// Java evaluates GenericRow.of(...) left to right.
		id, a, b, c := rng.nextLongN(1_000_000_000), rng.nextIntN(100000), rng.nextLongN(1_000_000_000), rng.nextIntN(100000)
		rows[i] = record.Row{id, a, b, c, genString(rng, strLen), genString(rng, strLen), genString(rng, strLen), genString(rng, strLen)}
	}
	return rows
}

// kvRows is FlussBench.kvRows: (id BIGINT, a INT, s1 STRING, s2 STRING);
// a fraction updateRatio of the rows reuse the key of an earlier row.
func kvRows(n, strLen int, updateRatio float64, seed int64) []record.Row {
	rng := newSplittable(seed)
	rows := make([]record.Row, 0, n)
	for i := 0; i < n; i++ {
		// Java evaluates GenericRow.of(id, nextInt, genString, genString) left to right.
		id := rng.nextLongN(1_000_000_000)
		a := rng.nextIntN(100000)
		s1 := genString(rng, strLen)
		s2 := genString(rng, strLen)
		r := record.Row{id, a, s1, s2}
		if len(rows) > 0 && rng.nextDouble() < updateRatio {
			r[0] = rows[rng.nextIntN(int32(len(rows)))][0]
		}
		rows = append(rows, r)
	}
	return rows
}

// lookupKeys is every distinct key of rows in first-seen order, shuffled as
// FlussBench does (Collections.shuffle with new Random(3)).
func lookupKeys(rows []record.Row) []int64 {
	seen := make(map[int64]struct{}, len(rows))
	keys := make([]int64, 0, len(rows))
	for _, r := range rows {
		id := r[0].(int64)
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			keys = append(keys, id)
		}
	}
	shuffle(keys, newJRandom(3))
	return keys
}
