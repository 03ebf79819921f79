package record

// Typed accessors for a Row's values. Each returns the value of column i and
// true, or the zero value and false when the value is NULL or of another
// type (for example after a schema change), so callers need no type switch.

// IsNull reports whether column i is NULL.
func (r Row) IsNull(i int) bool { return r[i] == nil }

func get[T any](r Row, i int) (T, bool) {
	v, ok := r[i].(T)
	return v, ok
}

// Bool returns a BOOLEAN value.
func (r Row) Bool(i int) (bool, bool) { return get[bool](r, i) }

// Int8 returns a TINYINT value.
func (r Row) Int8(i int) (int8, bool) { return get[int8](r, i) }

// Int16 returns a SMALLINT value.
func (r Row) Int16(i int) (int16, bool) { return get[int16](r, i) }

// Int32 returns an INT value.
func (r Row) Int32(i int) (int32, bool) { return get[int32](r, i) }

// Int64 returns a BIGINT value.
func (r Row) Int64(i int) (int64, bool) { return get[int64](r, i) }

// Float32 returns a FLOAT value.
func (r Row) Float32(i int) (float32, bool) { return get[float32](r, i) }

// Float64 returns a DOUBLE value.
func (r Row) Float64(i int) (float64, bool) { return get[float64](r, i) }

// String returns a CHAR or STRING value.
func (r Row) String(i int) (string, bool) { return get[string](r, i) }

// Bytes returns a BINARY or BYTES value.
func (r Row) Bytes(i int) ([]byte, bool) { return get[[]byte](r, i) }

// Decimal returns a DECIMAL value.
func (r Row) Decimal(i int) (DecimalValue, bool) { return get[DecimalValue](r, i) }

// Date returns a DATE value.
func (r Row) Date(i int) (DateValue, bool) { return get[DateValue](r, i) }

// TimeOfDay returns a TIME value.
func (r Row) TimeOfDay(i int) (TimeOfDay, bool) { return get[TimeOfDay](r, i) }

// TimestampNTZ returns a TIMESTAMP value.
func (r Row) TimestampNTZ(i int) (TimestampNTZ, bool) { return get[TimestampNTZ](r, i) }

// Instant returns a TIMESTAMP_LTZ value.
func (r Row) Instant(i int) (Instant, bool) { return get[Instant](r, i) }
