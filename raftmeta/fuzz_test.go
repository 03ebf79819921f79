package raftmeta

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"
)

// FuzzDecodeCommand: decoding any bytes returns a command or an error, never
// panics, and a decoded command re-encodes to the same bytes.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(encodeCommand(c))
	}
	f.Add([]byte{})
	f.Add([]byte{byte(IgnoreUnknownFlag | 0x70), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		if err != nil {
			return
		}
		if again := encodeCommand(c); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, again)
		}
	})
}

// FuzzRestoreSnapshot: restoring any bytes succeeds or returns an error,
// never panics; a successful restore re-encodes to the same bytes. Each
// input is also tried with its trailing checksum recomputed, so that
// mutations reach the structural checks behind the checksum.
func FuzzRestoreSnapshot(f *testing.F) {
	f.Add(buildSampleTree(f).f.snapshotBytes())
	f.Add(encodeSnapshot(newTree()))
	f.Add([]byte("RMETASNP"))
	f.Add(encodeSnapshotV1(buildSampleTree(f).f.mu.t))
	f.Fuzz(func(t *testing.T, b []byte) {
		try := func(b []byte) {
			fsm := newFSM(discardLogger, newWatchManager())
			if err := fsm.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
				return
			}
			again := fsm.snapshotBytes()
			if b[len(snapshotMagic)+1] < snapshotVersion {
				// An older version restores into the current one, stably.
				f2 := newFSM(discardLogger, newWatchManager())
				if err := f2.Restore(io.NopCloser(bytes.NewReader(again))); err != nil {
					t.Fatalf("re-encoded old snapshot does not restore: %v", err)
				}
				if !bytes.Equal(f2.snapshotBytes(), again) {
					t.Fatal("re-encoding of an old snapshot is not stable")
				}
				return
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs")
			}
		}
		try(b)
		if len(b) >= 4 {
			fixed := bytes.Clone(b)
			binary.BigEndian.PutUint32(fixed[len(fixed)-4:], crc32.Checksum(fixed[:len(fixed)-4], crcTable))
			try(fixed)
		}
	})
}
