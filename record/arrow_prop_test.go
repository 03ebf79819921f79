package record

import (
	"fmt"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// arrowGenType draws a column type of any root, with any parameters.
func arrowGenType(rt *rapid.T, label string) DataType {
	t := DataType{Root: TypeRoot(rapid.IntRange(int(Boolean), int(TimestampLTZ)).Draw(rt, label+".root")), Nullable: rapid.Bool().Draw(rt, label+".nullable")}
	switch t.Root {
	case Decimal:
		t.Precision = rapid.IntRange(1, MaxDecimalPrecision).Draw(rt, label+".precision")
		t.Scale = rapid.IntRange(0, t.Precision).Draw(rt, label+".scale")
	case Char, Binary:
		t.Length = rapid.IntRange(1, 8).Draw(rt, label+".length")
	case Time, Timestamp, TimestampLTZ:
		t.Precision = rapid.IntRange(0, MaxTimePrecision).Draw(rt, label+".precision")
	}
	return t
}

// arrowGenValue draws a value of type t that passes CheckValue (nil only for
// a nullable t).
func arrowGenValue(rt *rapid.T, t DataType, label string) any {
	if t.Nullable && rapid.IntRange(0, 4).Draw(rt, label+".null") == 0 {
		return nil
	}
	switch t.Root {
	case Boolean:
		return rapid.Bool().Draw(rt, label)
	case TinyInt:
		return rapid.Int8().Draw(rt, label)
	case SmallInt:
		return rapid.Int16().Draw(rt, label)
	case Int:
		return rapid.Int32().Draw(rt, label)
	case BigInt:
		return rapid.Int64().Draw(rt, label)
	case Float:
		return rapid.Float32().Draw(rt, label)
	case Double:
		return rapid.Float64().Draw(rt, label)
	case Decimal:
		digits := rapid.StringOfN(rapid.RuneFrom([]rune("0123456789")), 1, t.Precision, -1).Draw(rt, label)
		u, _ := new(big.Int).SetString(digits, 10)
		if rapid.Bool().Draw(rt, label+".neg") {
			u.Neg(u)
		}
		d, err := NewDecimal(u, int32(t.Precision), int32(t.Scale))
		if err != nil {
			rt.Fatal(err)
		}
		return d
	case Char:
		return rapid.StringN(0, t.Length, -1).Draw(rt, label)
	case String:
		return rapid.String().Draw(rt, label)
	case Binary:
		return rapid.SliceOfN(rapid.Byte(), t.Length, t.Length).Draw(rt, label)
	case Bytes:
		return rapid.SliceOf(rapid.Byte()).Draw(rt, label)
	case Date:
		return DateValue(rapid.Int32Range(int32(MinDate), int32(MaxDate)).Draw(rt, label))
	case Time:
		ms := rapid.Int32Range(0, msPerDay-1).Draw(rt, label)
		if t.Precision < 3 {
			unit := []int32{1000, 100, 10}[t.Precision]
			ms -= ms % unit
		}
		return TimeOfDay(ms)
	case Timestamp, TimestampLTZ:
		lo, hi := minTimestampMillis, maxTimestampMillis
		if t.Precision >= 7 {
			lo, hi = minNanoMillis+1, maxNanoMillis-1
		}
		millis := rapid.Int64Range(lo, hi).Draw(rt, label+".millis")
		nano := rapid.Int32Range(0, 999999).Draw(rt, label+".nano")
		// Drop the digits beyond the precision.
		frac := floorMod(millis, 1000)*1e6 + int64(nano)
		unit := int64(1)
		for range 9 - t.Precision {
			unit *= 10
		}
		frac -= frac % unit
		millis = floorDiv(millis, 1000)*1000 + frac/1e6
		nano = int32(frac % 1e6)
		if t.Root == TimestampLTZ {
			return Instant{millis, nano}
		}
		return TimestampNTZ{millis, nano}
	}
	rt.Fatalf("no generator for %s", t)
	return nil
}

// TestArrowProjectionProperty: for random schemas, rows, change types,
// codecs and column subsets, decoding a projected batch gives the full
// batch's rows projected, and the projected batch validates.
func TestArrowProjectionProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ncols := rapid.IntRange(1, 8).Draw(rt, "columns")
		s := Schema{Columns: make([]Column, ncols)}
		for i := range s.Columns {
			s.Columns[i] = Column{Name: fmt.Sprintf("c%d", i), Type: arrowGenType(rt, fmt.Sprintf("c%d", i))}
		}
		nrows := rapid.IntRange(0, 12).Draw(rt, "rows")
		appendOnly := rapid.Bool().Draw(rt, "appendOnly")
		rows := make([]Row, nrows)
		cts := make([]ChangeType, nrows)
		for i := range rows {
			rows[i] = make(Row, ncols)
			for j, c := range s.Columns {
				rows[i][j] = arrowGenValue(rt, c.Type, fmt.Sprintf("r%d.c%d", i, j))
			}
			if !appendOnly {
				cts[i] = ChangeType(rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("r%d.ct", i)))
			}
		}
		codec := rapid.SampledFrom(arrowCodecs).Draw(rt, "codec")
		mem := checkedAllocator(rt)
		b := buildArrow(rt, s, rows, cts, codec, mem)
		if err := ValidateArrowBatch(b, s); err != nil {
			rt.Fatalf("ValidateArrowBatch: %v", err)
		}
		full, fullCT := decodeRows(rt, b, s, mem)
		for i := range rows {
			if !full[i].Equal(rows[i]) || fullCT[i] != cts[i] {
				rt.Fatalf("row %d decodes as %v %v, want %v %v", i, fullCT[i], full[i], cts[i], rows[i])
			}
		}

		var cols []int
		for i := range ncols {
			if rapid.Bool().Draw(rt, fmt.Sprintf("keep%d", i)) {
				cols = append(cols, i)
			}
		}
		if len(cols) == 0 {
			cols = []int{rapid.IntRange(0, ncols-1).Draw(rt, "only")}
		}
		_, p, err := ProjectBatch(nil, b, s, cols)
		if err != nil {
			rt.Fatalf("ProjectBatch(%v): %v", cols, err)
		}
		if err := p.Validate(); err != nil {
			rt.Fatalf("projected batch does not validate: %v", err)
		}
		ps := s.Project(cols)
		if err := ValidateArrowBatch(p, ps); err != nil {
			rt.Fatalf("ValidateArrowBatch(projected): %v", err)
		}
		got, gotCT := decodeRows(rt, p, ps, mem)
		want := projectRows(full, cols)
		if len(got) != len(want) {
			rt.Fatalf("projected batch has %d rows, want %d", len(got), len(want))
		}
		for i := range want {
			if !got[i].Equal(want[i]) || gotCT[i] != fullCT[i] {
				rt.Fatalf("projected row %d = %v %v, want %v %v", i, gotCT[i], got[i], fullCT[i], want[i])
			}
		}
		// JSON of every decoded row reads back as the same row.
		for i, r := range full {
			js := AppendRowJSON(nil, s, r)
			back, err := RowFromJSON(s, js)
			if err != nil || !back.Equal(r) {
				rt.Fatalf("row %d: JSON %s reads back as %v, %v", i, js, back, err)
			}
			if again := AppendRowJSON(nil, s, back); string(again) != string(js) {
				rt.Fatalf("row %d: JSON not stable:\n%s\n%s", i, js, again)
			}
		}
	})
}
