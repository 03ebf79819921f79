package arrowmsg

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A Decoder decodes what Decode does, from several goroutines at once, and
// does the schema's work once: decoding with it allocates less than Decode
// per message.
func TestDecoder(t *testing.T) {
	rec := newRecord(memory.DefaultAllocator, rand.New(rand.NewPCG(5, 6)), benchSchema, 200, 10)
	defer rec.Release()
	d, err := NewDecoder(benchSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codecs {
		msg, err := Encode(rec, c, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5 {
					got, err := d.Decode(msg, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if !array.RecordEqual(got, rec) {
						t.Errorf("%s: Decoder.Decode gave another record", c)
					}
					got.Release()
				}
			})
		}
		wg.Wait()
		if _, err := d.Decode(msg[:len(msg)-9], nil); err == nil {
			t.Errorf("%s: a cut message decoded", c)
		}
		if c != CodecNone {
			continue
		}
		once := testing.AllocsPerRun(20, func() {
			got, err := d.Decode(msg, nil)
			if err != nil {
				t.Fatal(err)
			}
			got.Release()
		})
		each := testing.AllocsPerRun(20, func() {
			got, err := Decode(msg, benchSchema, nil)
			if err != nil {
				t.Fatal(err)
			}
			got.Release()
		})
		if once >= each {
			t.Errorf("Decoder.Decode allocates %v times a message, Decode %v: the schema's work is redone", once, each)
		}
		t.Logf("allocations per message: Decoder %v, Decode %v", once, each)
	}
}
