package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// ErrClosed is returned by a Writer's methods after Close.
var ErrClosed = errors.New("history: writer closed")

// line is one line of the file: exactly one of its fields is set.
type line struct {
	Op    *Op    `json:"op,omitempty"`
	Fault *Fault `json:"fault,omitempty"`
}

// Writer writes a history as JSON Lines. It is safe for concurrent use by
// every client of a run; each record is written whole on its own line.
// Lines are buffered: they reach the file on Close (or when the buffer
// fills), so a run must Close its writer, even when it fails.
type Writer struct {
	mu struct {
		sync.Mutex
		w      *bufio.Writer
		closer io.Closer // nil for NewWriter
		err    error     // the first write error, sticky
		closed bool
	}
}

// NewWriter writes to w; Close flushes but does not close w.
func NewWriter(w io.Writer) *Writer {
	hw := &Writer{}
	hw.mu.w = bufio.NewWriterSize(w, 1<<20)
	return hw
}

// Create creates (or truncates) the file at path and writes to it; Close
// closes it.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	w := NewWriter(f)
	w.mu.closer = f
	return w, nil
}

// Op writes one operation. It returns the first error any write of this
// writer met (later writes are not attempted), or ErrClosed.
func (w *Writer) Op(op Op) error { return w.write(line{Op: &op}) }

// Fault writes one fault, with the errors of Op.
func (w *Writer) Fault(f Fault) error { return w.write(line{Fault: &f}) }

func (w *Writer) write(l line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return ErrClosed
	}
	if w.mu.err == nil {
		if _, err := w.mu.w.Write(b); err != nil {
			w.mu.err = fmt.Errorf("history: write: %w", err)
		}
	}
	return w.mu.err
}

// Close flushes what is buffered and closes the file of Create. It returns
// the first error of any write, the flush or the close; a second Close
// returns ErrClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return ErrClosed
	}
	w.mu.closed = true
	err := w.mu.err
	if ferr := w.mu.w.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("history: flush: %w", ferr)
	}
	if w.mu.closer != nil {
		if cerr := w.mu.closer.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("history: close: %w", cerr)
		}
	}
	return err
}

// Read reads a history written by a Writer. A line that is not a record
// (bad JSON, neither or both of op and fault) is an error naming its line
// number, except a last line cut short (a writer killed mid-write), which
// is dropped.
func Read(r io.Reader) (*History, error) {
	h := &History{}
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 1; ; n++ {
		b, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return h, nil // b, if any, is a torn last line: dropped
		}
		if err != nil {
			return nil, fmt.Errorf("history: read line %d: %w", n, err)
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", n, err)
		}
		switch {
		case l.Op != nil && l.Fault == nil:
			h.Ops = append(h.Ops, *l.Op)
		case l.Fault != nil && l.Op == nil:
			h.Faults = append(h.Faults, *l.Fault)
		default:
			return nil, fmt.Errorf("history: line %d: want exactly one of \"op\" and \"fault\"", n)
		}
	}
}

// ReadFile reads the history in the file at path.
func ReadFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}
