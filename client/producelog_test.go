package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	stromv1 "strom/rpc/gen/strom/v1"
	"strom/rpc/gen/strom/v1/stromv1connect"
)

// The hand-written body is the protobuf encoding of the request, whether it
// is read or written out.
func TestProduceBodyIsTheProtobufEncoding(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &stromv1.ProduceLogRequest{
			Database:  rapid.String().Draw(t, "database"),
			Table:     rapid.String().Draw(t, "table"),
			TimeoutMs: rapid.Int32().Draw(t, "timeout"),
		}
		if rapid.Bool().Draw(t, "hasAcks") {
			a := rapid.Int32().Draw(t, "acks")
			m.Acks = &a
		}
		for range rapid.IntRange(0, 4).Draw(t, "buckets") {
			m.Buckets = append(m.Buckets, &stromv1.ProduceBucket{
				Bucket:  rapid.Int32().Draw(t, "bucket"),
				Records: rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "records"),
			})
		}
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b := newProduceBody(m)
		if b.size != len(want) {
			t.Fatalf("size %d, want %d", b.size, len(want))
		}
		read, err := io.ReadAll(io.LimitReader(newProduceBody(m), 1<<20)) // LimitReader hides WriteTo
		if err != nil {
			t.Fatal(err)
		}
		var written bytes.Buffer
		if _, err := newProduceBody(m).WriteTo(&written); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(read, want) || !bytes.Equal(written.Bytes(), want) {
			t.Fatalf("body differs from proto.Marshal:\nwant    %x\nread    %x\nwritten %x", want, read, written.Bytes())
		}
	})
}

// Errors from a Connect handler come back as connect-go's client returns
// them: code, message and Strom's detail.
func TestProduceLogReadsConnectErrors(t *testing.T) {
	want := connect.NewError(connect.CodeNotFound, errors.New(`table "demo.nope" does not exist`))
	d, err := connect.NewErrorDetail(&stromv1.ErrorDetail{Code: 7, Name: "TABLE_NOT_EXIST"})
	if err != nil {
		t.Fatal(err)
	}
	want.AddDetail(d)
	mux := http.NewServeMux()
	mux.Handle(stromv1connect.NewTabletServiceHandler(failingTablet{err: want}))
	mux.HandleFunc("/plain/"+stromv1connect.TabletServiceProduceLogProcedure[1:], func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.produce(t.Context(), c.seed(), &stromv1.ProduceLogRequest{Database: "demo", Table: "nope"})
	var e *Error
	if !errors.As(err, &e) || e.Code != 7 || e.Name != "TABLE_NOT_EXIST" || e.Connect != connect.CodeNotFound || e.Message != want.Message() {
		t.Fatalf("got %#v (%v)", e, err)
	}

	c, _ = New(srv.URL + "/plain")
	_, err = c.produceLog(t.Context(), c.seed(), &stromv1.ProduceLogRequest{})
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("HTTP 503 without a Connect body: %v", err)
	}

	srv.Close()
	_, err = c.produce(t.Context(), c.seed(), &stromv1.ProduceLogRequest{})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("stopped server: %v", err)
	}
}

type failingTablet struct {
	stromv1connect.UnimplementedTabletServiceHandler
	err error
}

func (f failingTablet) ProduceLog(context.Context, *connect.Request[stromv1.ProduceLogRequest]) (*connect.Response[stromv1.ProduceLogResponse], error) {
	return nil, f.err
}

// produceLog sends the caller's batches from their slices: the bytes
// allocated per call are a small fraction of the batch (connect-go would
// marshal the whole request into a buffer of its own first).
func TestProduceLogDoesNotCopyBatches(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/proto")
		_, _ = w.Write(nil)
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	batch := bytes.Repeat([]byte{1}, 4<<20)
	m := &stromv1.ProduceLogRequest{Database: "d", Table: "t", Buckets: []*stromv1.ProduceBucket{{Records: batch}}}
	if _, err := c.produceLog(t.Context(), c.seed(), m); err != nil {
		t.Fatal(err)
	}
	const n = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := c.produceLog(t.Context(), c.seed(), m); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if perCall := (after.TotalAlloc - before.TotalAlloc) / n; perCall > uint64(len(batch))/8 {
		t.Fatalf("%d bytes allocated per call of a %d-byte batch", perCall, len(batch))
	}
}
