package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// progress shows a long command's progress on a terminal, once every
// 250 ms: rows, rows/s and MB/s, and with the input's size known (a file),
// a bar and the share of it read. Off a terminal it prints nothing.
type progress struct {
	w     io.Writer
	verb  string
	tty   bool
	start time.Time
	last  time.Time
	rows  int
	bytes int
	// total is the input's size in bytes, 0 when unknown.
	total int64
}

// newProgress returns a progress writing to w, for an input of total
// bytes (0: unknown).
func newProgress(w io.Writer, verb string, total int64) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	now := time.Now()
	return &progress{w: w, verb: verb, tty: tty, start: now, last: now, total: total}
}

// inputSize is the size of in when it is a regular file (--file, or stdin
// redirected from one), else 0.
func inputSize(in io.Reader) int64 {
	f, ok := in.(*os.File)
	if !ok {
		return 0
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
}

// add counts rows and the input bytes they came from.
func (p *progress) add(rows, bytes int) {
	p.rows += rows
	p.bytes += bytes
	if !p.tty {
		return
	}
	if now := time.Now(); now.Sub(p.last) >= 250*time.Millisecond {
		p.last = now
		fmt.Fprint(p.w, "\r"+p.line(now.Sub(p.start))+"   ")
	}
}

// barWidth is the bar's width in characters.
const barWidth = 24

// line renders the progress after elapsed.
func (p *progress) line(elapsed time.Duration) string {
	secs := max(elapsed.Seconds(), 1e-9)
	rates := fmt.Sprintf("%d rows  %.0f rows/s  %.2f MB/s", p.rows, float64(p.rows)/secs, float64(p.bytes)/secs/1e6)
	if p.total <= 0 {
		return p.verb + " " + rates
	}
	frac := min(float64(p.bytes)/float64(p.total), 1)
	filled := int(frac * barWidth)
	bar := strings.Repeat("=", filled)
	if filled < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-filled-1)
	}
	return fmt.Sprintf("%s [%s] %3.0f%%  %s", p.verb, bar, frac*100, rates)
}

// done prints the final line (on a terminal, when anything was counted).
func (p *progress) done() {
	if p.tty && p.rows > 0 {
		fmt.Fprintln(p.w, "\r"+p.line(time.Since(p.start))+"   ")
	}
}
