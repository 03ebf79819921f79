package record

import "testing"

func TestRowAccessors(t *testing.T) {
	r := Row{true, int8(1), int16(2), int32(3), int64(4), float32(5), 6.0, "s", []byte("b"), DateValue(7), TimeOfDay(8), TimestampNTZ{Millis: 9}, Instant{EpochMillis: 10}, nil}
	if v, ok := r.Bool(0); !ok || !v {
		t.Error("Bool")
	}
	if v, ok := r.Int8(1); !ok || v != 1 {
		t.Error("Int8")
	}
	if v, ok := r.Int16(2); !ok || v != 2 {
		t.Error("Int16")
	}
	if v, ok := r.Int32(3); !ok || v != 3 {
		t.Error("Int32")
	}
	if v, ok := r.Int64(4); !ok || v != 4 {
		t.Error("Int64")
	}
	if v, ok := r.Float32(5); !ok || v != 5 {
		t.Error("Float32")
	}
	if v, ok := r.Float64(6); !ok || v != 6 {
		t.Error("Float64")
	}
	if v, ok := r.String(7); !ok || v != "s" {
		t.Error("String")
	}
	if v, ok := r.Bytes(8); !ok || string(v) != "b" {
		t.Error("Bytes")
	}
	if v, ok := r.Date(9); !ok || v != 7 {
		t.Error("Date")
	}
	if v, ok := r.TimeOfDay(10); !ok || v != 8 {
		t.Error("TimeOfDay")
	}
	if v, ok := r.TimestampNTZ(11); !ok || v.Millis != 9 {
		t.Error("TimestampNTZ")
	}
	if v, ok := r.Instant(12); !ok || v.EpochMillis != 10 {
		t.Error("Instant")
	}
	if !r.IsNull(13) || r.IsNull(0) {
		t.Error("IsNull")
	}
	if _, ok := r.Int64(13); ok {
		t.Error("NULL read as a value")
	}
	if _, ok := r.Int64(3); ok {
		t.Error("INT read as BIGINT")
	}
}
