package arrowmsg

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// countingBodies is a BodyPool that counts what it hands out and gets back,
// and fills what it hands out with 0xAA, as a reused body would be.
type countingBodies struct {
	BodyPool
	allocated, freed atomic.Int64
	dropped          atomic.Int64 // freed, but not as Allocate gave it (the pool drops it)
}

func (c *countingBodies) Allocate(size int) []byte {
	c.allocated.Add(1)
	b := c.BodyPool.Allocate(size)
	for i := range b {
		b[i] = 0xAA
	}
	return b
}

func (c *countingBodies) Free(b []byte) {
	c.freed.Add(1)
	if cap(b) != 1<<bodyClass(cap(b)) {
		c.dropped.Add(1)
	}
	c.BodyPool.Free(b)
}

// DecodeWith takes the body from bodies, decodes what Decode does (every
// flat type, nulls, every codec) from a body that is not zeroed, and gives it
// back only when the record's last buffer is released.
func TestDecodeWithBodies(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var fields []arrow.Field
	for i, ft := range flatTypes {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("f%d", i), Type: ft(r), Nullable: true})
	}
	schema := arrow.NewSchema(fields, nil)
	d, err := NewDecoder(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codecs {
		for _, rows := range []int{1, 7, 500} {
			rec := newRecord(memory.DefaultAllocator, r, schema, rows, 20)
			msg, err := Encode(rec, c, 3, nil)
			if err != nil {
				t.Fatal(err)
			}
			bodies := &countingBodies{}
			for round := range 3 { // the later rounds reuse the first's body
				got, err := d.DecodeWith(msg, nil, bodies)
				if err != nil {
					t.Fatalf("%s, %d rows: %v", c, rows, err)
				}
				if !array.RecordEqual(got, rec) {
					t.Errorf("%s, %d rows, round %d: DecodeWith gave another record", c, rows, round)
				}
				if a, f := bodies.allocated.Load(), bodies.freed.Load(); a != int64(round+1) || f != int64(round) {
					t.Fatalf("%s, %d rows, round %d: %d bodies allocated, %d freed before the record's release; want %d and %d", c, rows, round, a, f, round+1, round)
				}
				col := got.Column(0)
				col.Retain()
				got.Release()
				if f := bodies.freed.Load(); f != int64(round) {
					t.Fatalf("%s, %d rows: the body was freed while a column held it", c, rows)
				}
				col.Release()
				if f := bodies.freed.Load(); f != int64(round+1) {
					t.Fatalf("%s, %d rows: the body was not freed with the record's last buffer", c, rows)
				}
				if d := bodies.dropped.Load(); d != 0 {
					t.Fatalf("%s, %d rows: %d bodies freed with a capacity other than Allocate's: the pool drops them", c, rows, d)
				}
			}
			rec.Release()
		}
	}
	// A message that fails to decode gives its body back.
	rec := newRecord(memory.DefaultAllocator, r, schema, 50, 20)
	defer rec.Release()
	msg, err := Encode(rec, CodecZSTD, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	bodies := &countingBodies{}
	bad := append([]byte(nil), msg...)
	bad[len(bad)-20] ^= 0xff
	if _, err := d.DecodeWith(bad, nil, bodies); err == nil {
		t.Fatal("a damaged message decoded")
	}
	if a, f := bodies.allocated.Load(), bodies.freed.Load(); a != f {
		t.Errorf("a failed decode: %d bodies allocated, %d freed", a, f)
	}
}

// A BodyPool hands out the bodies freed to it again, and what it did not
// hand out it drops.
func TestBodyPool(t *testing.T) {
	p := NewBodyPool()
	for _, size := range []int{0, 1, 4096, 4097, 1 << 20} {
		b := p.Allocate(size)
		if len(b) != size || cap(b) != 1<<bodyClass(size) {
			t.Errorf("Allocate(%d): len %d cap %d", size, len(b), cap(b))
		}
	}
	p.Free(make([]byte, 5000)) // not a class's size: dropped
	if b := p.Allocate(5000); cap(b) != 8192 {
		t.Errorf("Allocate(5000) after a foreign Free: cap %d", cap(b))
	}
}
