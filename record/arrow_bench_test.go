package record

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"strom/record/arrowmsg"
)

// The benchmark dataset: 20 columns (6 INT, 6 BIGINT, 8 STRING), about 2 KB
// per row, 1000 rows per batch. The strings look like event payloads (text
// of words from a vocabulary of about 260 with Zipf frequencies, URLs, user
// agents, JSON, trace ids of random hex) rather than random bytes, so that
// compression ratios mean something. The integers are ids, counters,
// timestamps, small codes, and one random 63-bit session id.

const benchRows = 1000

var benchVocabulary = strings.Fields(`the a of and to in is for on with as by at from that this it be are was were
order customer product price cart checkout payment shipping delivery warehouse stock item items quantity discount
coupon invoice refund return account login logout session user profile address city country region store online
mobile desktop browser search query result page category brand model color size weight review rating comment
message event click view scroll add remove update create delete status pending confirmed shipped delivered cancelled
failed success error warning info debug latency request response timeout retry service gateway backend frontend
database cache queue topic partition offset broker producer consumer stream table bucket replica leader follower
snapshot segment index batch record schema column value key metric counter gauge histogram sample trace span parent
child root node cluster zone rack host port network disk memory cpu thread process job task worker scheduler
window watermark checkpoint state backlog throughput bandwidth green blue red black white small medium large
premium standard basic express economy priority normal low high new used refurbished limited special seasonal`)

var benchUserAgents = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
	"Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
	"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.6478.71 Mobile Safari/537.36",
	"okhttp/4.12.0",
	"curl/8.8.0",
	"python-requests/2.32.3",
}

var benchEvents = []string{"page_view", "click", "add_to_cart", "remove_from_cart", "checkout_started",
	"payment_authorized", "order_placed", "order_shipped", "search", "login", "logout", "review_posted"}

var benchPlaces = []string{"DE/Bavaria/Munich", "DE/Berlin/Berlin", "FR/Ile-de-France/Paris", "US/California/San Francisco",
	"US/New York/New York", "GB/England/London", "JP/Tokyo/Tokyo", "BR/Sao Paulo/Sao Paulo", "IN/Karnataka/Bengaluru",
	"CN/Zhejiang/Hangzhou", "AU/New South Wales/Sydney", "CA/Ontario/Toronto"}

func benchSchema(tb testing.TB) Schema {
	tb.Helper()
	cols, err := ParseColumns("id INT NOT NULL, user_id INT, quantity INT, status INT, region INT, latency_ms INT, " +
		"ts BIGINT NOT NULL, session_id BIGINT, order_id BIGINT, price_cents BIGINT, bytes BIGINT, seq BIGINT, " +
		"event STRING, url STRING, user_agent STRING, message STRING, payload STRING, place STRING, description STRING, trace STRING")
	if err != nil {
		tb.Fatal(err)
	}
	return Schema{Columns: cols}
}

// benchText draws words with a Zipf distribution (s = 1.1) over the
// vocabulary, as word frequencies in text follow one.
type benchText struct {
	rng  *rand.Rand
	zipf *rand.Zipf
}

func newBenchText(rng *rand.Rand) benchText {
	return benchText{rng, rand.NewZipf(rng, 1.1, 1, uint64(len(benchVocabulary)-1))}
}

// words returns n words separated by spaces.
func (g benchText) words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(benchVocabulary[g.zipf.Uint64()])
	}
	return b.String()
}

func benchHex(rng *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[rng.IntN(16)]
	}
	return string(b)
}

// benchDataset returns benchRows rows and their total value bytes.
func benchDataset(tb testing.TB) (Schema, []Row, int) {
	s := benchSchema(tb)
	rng := rand.New(rand.NewPCG(1, 2))
	text := newBenchText(rng)
	rows := make([]Row, benchRows)
	total := 0
	for i := range rows {
		ev := benchEvents[rng.IntN(len(benchEvents))]
		r := Row{
			int32(i), int32(rng.IntN(100000)), int32(1 + rng.IntN(10)), []int32{200, 200, 200, 201, 404, 500}[rng.IntN(6)],
			int32(rng.IntN(50)), int32(1 + rng.IntN(2000)),
			int64(1_790_000_000_000 + i*7 + rng.IntN(5)), int64(rng.Uint64() >> 1), int64(5_000_000 + i), int64(100 + rng.IntN(100000)),
			int64(rng.IntN(1_000_000)), int64(10_000_000 + i),
			ev,
			"https://shop.example.com/" + text.words(1) + "/" + strings.ReplaceAll(text.words(4), " ", "-") +
				fmt.Sprintf("-%d?ref=%s&utm_source=%s", rng.IntN(100000), text.words(1), text.words(1)),
			benchUserAgents[rng.IntN(len(benchUserAgents))],
			text.words(90 + rng.IntN(40)),
			fmt.Sprintf(`{"event":%q,"session":"%s","items":[{"sku":"SKU-%05d","qty":%d,"price":%d.%02d},{"sku":"SKU-%05d","qty":%d,"price":%d.%02d}],"tags":["%s","%s","%s"],"note":"%s"}`,
				ev, benchHex(rng, 16), rng.IntN(20000), 1+rng.IntN(5), rng.IntN(500), rng.IntN(100), rng.IntN(20000), 1+rng.IntN(5),
				rng.IntN(500), rng.IntN(100), text.words(1), text.words(1), text.words(1), text.words(12)),
			benchPlaces[rng.IntN(len(benchPlaces))],
			text.words(170 + rng.IntN(50)),
			fmt.Sprintf("trace-id=%s span-id=%s parent-id=%s service=%s-%s", benchHex(rng, 32), benchHex(rng, 16), benchHex(rng, 16),
				text.words(1), text.words(1)),
		}
		total += 6*4 + 6*8
		for _, v := range r[12:] {
			total += len(v.(string))
		}
		rows[i] = r
	}
	return s, rows, total
}

// benchBodies returns the Arrow message body size of a batch.
func benchBody(tb testing.TB, b Batch) int {
	m, err := arrowmsg.Parse(b.Records())
	if err != nil {
		tb.Fatal(err)
	}
	return len(m.Body())
}

// TestArrowCompressionRatio checks that each codec compresses the
// benchmark dataset by at least its floor (the ratio uncompressed Arrow
// body / compressed body; docs/benchmarks.md reports ZSTD near 4× on
// larger batches), that a higher ZSTD level is never larger, and that the
// compressed batch decodes to the rows it was built from. It logs the
// sizes.
func TestArrowCompressionRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 2 MB batch per codec")
	}
	s, rows, total := benchDataset(t)
	plain := benchBody(t, buildArrow(t, s, rows, nil, ArrowCompression{Type: CompressionNone}, nil))
	t.Logf("dataset: %d rows, %d bytes of values (%.0f per row); uncompressed Arrow body %d bytes", len(rows), total, float64(total)/float64(len(rows)), plain)
	prevZstd := plain
	for _, tc := range []struct {
		c     ArrowCompression
		floor float64
	}{
		{ArrowCompression{Type: CompressionLZ4Frame}, 2},
		{ArrowCompression{Type: CompressionZSTD, ZstdLevel: 1}, 3},
		{ArrowCompression{Type: CompressionZSTD, ZstdLevel: 3}, 3.3},
		{ArrowCompression{Type: CompressionZSTD, ZstdLevel: 9}, 3.3},
	} {
		b := buildArrow(t, s, rows, nil, tc.c, nil)
		body := benchBody(t, b)
		ratio := float64(plain) / float64(body)
		t.Logf("%-10s body %8d bytes, ratio %.2f", tc.c, body, ratio)
		if ratio < tc.floor {
			t.Errorf("%s: ratio %.2f, want at least %.1f", tc.c, ratio, tc.floor)
		}
		if tc.c.Type == CompressionZSTD {
			if body > prevZstd {
				t.Errorf("%s: body %d bytes, larger than at the lower level (%d)", tc.c, body, prevZstd)
			}
			prevZstd = body
		}
		ab, err := DecodeArrowBatch(b, s, nil)
		if err != nil {
			t.Fatalf("%s: decode: %v", tc.c, err)
		}
		if ab.Len() != len(rows) {
			t.Fatalf("%s: %d rows decoded, want %d", tc.c, ab.Len(), len(rows))
		}
		for i := range rows {
			if got := ab.Row(i); fmt.Sprint(got) != fmt.Sprint(rows[i]) {
				t.Fatalf("%s: row %d decodes to %v, want %v", tc.c, i, got, rows[i])
			}
		}
		ab.Release()
	}
}

func BenchmarkArrowBuild(b *testing.B) {
	s, rows, total := benchDataset(b)
	plain := benchBody(b, buildArrow(b, s, rows, nil, ArrowCompression{Type: CompressionNone}, nil))
	for _, c := range arrowCodecs {
		b.Run(c.String(), func(b *testing.B) {
			ab, err := NewArrowBuilder(s, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer ab.Release()
			var dst []byte
			var batch Batch
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range rows {
					if err := ab.Append(r, AppendOnly); err != nil {
						b.Fatal(err)
					}
				}
				dst, batch, err = ab.Build(dst[:0], BatchHeader{}, c)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(batch)), "batch-bytes")
			b.ReportMetric(float64(plain)/float64(benchBody(b, batch)), "body-ratio")
		})
	}
}

func BenchmarkDecodeArrowBatch(b *testing.B) {
	s, rows, total := benchDataset(b)
	for _, c := range arrowCodecs {
		batch := buildArrow(b, s, rows, nil, c, nil)
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				ab, err := DecodeArrowBatch(batch, s, nil)
				if err != nil {
					b.Fatal(err)
				}
				ab.Release()
			}
		})
		b.Run(c.String()+"/rows", func(b *testing.B) {
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				ab, err := DecodeArrowBatch(batch, s, nil)
				if err != nil {
					b.Fatal(err)
				}
				for i := range ab.Len() {
					_ = ab.Row(i)
				}
				ab.Release()
			}
		})
	}
}

func BenchmarkProjectBatch(b *testing.B) {
	s, rows, _ := benchDataset(b)
	for _, c := range arrowCodecs {
		batch := buildArrow(b, s, rows, nil, c, nil)
		for _, n := range []int{1, 5, 10, 20} {
			// Spread the chosen columns over the three kinds.
			cols := make([]int, 0, n)
			for i := range n {
				cols = append(cols, i*len(s.Columns)/n)
			}
			b.Run(fmt.Sprintf("%s/cols=%d", c, n), func(b *testing.B) {
				var dst []byte
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				for b.Loop() {
					var err error
					dst, _, err = ProjectBatch(dst[:0], batch, s, cols)
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(dst)), "out-bytes")
			})
		}
	}
}

// BenchmarkCheckArrowBatch is produce's validation of one batch of the
// benchmark dataset (benchRows rows, ~2 KB each), cheap (the metadata and
// each buffer's first bytes) and full (log.validation.full: decompress and
// decode). MB/s is of the rows' uncompressed size.
func BenchmarkCheckArrowBatch(b *testing.B) {
	s, rows, total := benchDataset(b)
	for _, c := range arrowCodecs {
		batch := buildArrow(b, s, rows, nil, c, nil)
		for _, full := range []bool{false, true} {
			name := "cheap"
			if full {
				name = "full"
			}
			b.Run(c.String()+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(total))
				b.ReportAllocs()
				for b.Loop() {
					if err := CheckArrowBatch(batch, s, full); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
