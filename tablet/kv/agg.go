package kv

import (
	"bytes"
	"cmp"
	"fmt"
	"math/big"

	"strom/record"
)

// Aggregate functions of the aggregation merge engine (Fluss's
// FieldAggregator family, after Paimon's). Every function but last_value
// and first_value ignores NULLs: a NULL input keeps the accumulator, and a
// NULL accumulator takes the input.

type aggFunc uint8

const (
	aggNone aggFunc = iota
	aggSum
	aggProduct
	aggMax
	aggMin
	aggLastValue
	aggLastValueIgnoreNulls
	aggFirstValue
	aggFirstValueIgnoreNulls
	aggListagg
	aggBoolAnd
	aggBoolOr
)

var aggNames = [...]string{"", "sum", "product", "max", "min", "last_value", "last_value_ignore_nulls",
	"first_value", "first_value_ignore_nulls", "listagg", "bool_and", "bool_or"}

func (f aggFunc) String() string { return aggNames[f] }

func parseAggFunc(s string) (aggFunc, bool) {
	for i, n := range aggNames {
		if i > 0 && n == s {
			return aggFunc(i), true
		}
	}
	return aggNone, false
}

func isNumeric(r record.TypeRoot) bool {
	switch r {
	case record.TinyInt, record.SmallInt, record.Int, record.BigInt, record.Float, record.Double, record.Decimal:
		return true
	}
	return false
}

// supports reports whether f applies to columns of type r.
func (f aggFunc) supports(r record.TypeRoot) bool {
	switch f {
	case aggSum, aggProduct:
		return isNumeric(r)
	case aggMax, aggMin:
		return isNumeric(r) || r == record.Char || r == record.String || r == record.Date ||
			r == record.Time || r == record.Timestamp || r == record.TimestampLTZ || r == record.Boolean ||
			r == record.Binary || r == record.Bytes
	case aggListagg:
		return r == record.Char || r == record.String
	case aggBoolAnd, aggBoolOr:
		return r == record.Boolean
	}
	return true
}

// apply folds the input v into the accumulator acc (the stored value).
func (f aggFunc) apply(acc, v any, delim string, t record.DataType) (any, error) {
	switch f {
	case aggLastValue:
		return v, nil
	case aggFirstValue:
		return acc, nil
	}
	if v == nil {
		return acc, nil
	}
	if acc == nil {
		return v, nil
	}
	switch f {
	case aggLastValueIgnoreNulls:
		return v, nil
	case aggFirstValueIgnoreNulls:
		return acc, nil
	case aggSum, aggProduct:
		return arith(f == aggSum, acc, v, t)
	case aggMax:
		if compare(v, acc) > 0 {
			return v, nil
		}
		return acc, nil
	case aggMin:
		if compare(v, acc) < 0 {
			return v, nil
		}
		return acc, nil
	case aggListagg:
		return acc.(string) + delim + v.(string), nil
	case aggBoolAnd:
		return acc.(bool) && v.(bool), nil
	case aggBoolOr:
		return acc.(bool) || v.(bool), nil
	}
	return nil, fmt.Errorf("aggregate function %d", f)
}

// arith adds or multiplies two values of one numeric type. Integers wrap
// on overflow, as Java's do; a DECIMAL result that does not fit the
// column's precision is an error.
func arith(sum bool, a, b any, t record.DataType) (any, error) {
	switch x := a.(type) {
	case int8:
		return pick(sum, x+b.(int8), x*b.(int8)), nil
	case int16:
		return pick(sum, x+b.(int16), x*b.(int16)), nil
	case int32:
		return pick(sum, x+b.(int32), x*b.(int32)), nil
	case int64:
		return pick(sum, x+b.(int64), x*b.(int64)), nil
	case float32:
		return pick(sum, x+b.(float32), x*b.(float32)), nil
	case float64:
		return pick(sum, x+b.(float64), x*b.(float64)), nil
	case record.DecimalValue:
		y := b.(record.DecimalValue)
		var u *big.Int
		if sum {
			u = new(big.Int).Add(x.Unscaled(), y.Unscaled())
		} else {
			// (a·10^-s)(b·10^-s) = ab·10^-2s: rescale to s, rounding half up.
			u = new(big.Int).Mul(x.Unscaled(), y.Unscaled())
			u = divRoundHalfUp(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Scale)), nil))
		}
		d, err := record.NewDecimal(u, int32(t.Precision), int32(t.Scale))
		if err != nil {
			return nil, fmt.Errorf("%s overflows %s", map[bool]string{true: "sum", false: "product"}[sum], t)
		}
		return d, nil
	}
	return nil, fmt.Errorf("cannot aggregate a %T", a)
}

func pick[T any](sum bool, s, p T) T {
	if sum {
		return s
	}
	return p
}

func divRoundHalfUp(n, d *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(n, d, new(big.Int))
	if new(big.Int).Abs(new(big.Int).Mul(r, big.NewInt(2))).Cmp(d) >= 0 {
		if n.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// compare orders two non-NULL values of one column type.
func compare(a, b any) int {
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		if x == y {
			return 0
		} else if y {
			return -1
		}
		return 1
	case int8:
		return cmp.Compare(x, b.(int8))
	case int16:
		return cmp.Compare(x, b.(int16))
	case int32:
		return cmp.Compare(x, b.(int32))
	case int64:
		return cmp.Compare(x, b.(int64))
	case float32:
		return cmp.Compare(x, b.(float32))
	case float64:
		return cmp.Compare(x, b.(float64))
	case string:
		return cmp.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case record.DecimalValue:
		return x.Unscaled().Cmp(b.(record.DecimalValue).Unscaled())
	case record.DateValue:
		return cmp.Compare(x, b.(record.DateValue))
	case record.TimeOfDay:
		return cmp.Compare(x, b.(record.TimeOfDay))
	case record.TimestampNTZ:
		y := b.(record.TimestampNTZ)
		return cmp.Or(cmp.Compare(x.Millis, y.Millis), cmp.Compare(x.NanoOfMilli, y.NanoOfMilli))
	case record.Instant:
		y := b.(record.Instant)
		return cmp.Or(cmp.Compare(x.EpochMillis, y.EpochMillis), cmp.Compare(x.NanoOfMilli, y.NanoOfMilli))
	}
	return 0
}
