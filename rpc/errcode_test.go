package rpc

import (
	"fmt"
	"testing"

	"strom/tablet/kv"
)

// TestKvStoreCorruptIsRetriable: a lookup refused by a damaged KV store
// (being rebuilt) answers KV_REBUILDING, retriable, not the permanent
// KV_STORAGE_EXCEPTION.
func TestKvStoreCorruptIsRetriable(t *testing.T) {
	err := fmt.Errorf("kv: lookup: %w: %w", kv.ErrStoreCorrupt, fmt.Errorf("pebble: checksum mismatch"))
	code, _ := CodeOf(err)
	if code != CodeKvRebuilding || !code.Retriable {
		t.Fatalf("CodeOf(%v) = %+v, want KV_REBUILDING, retriable", err, code)
	}
}
