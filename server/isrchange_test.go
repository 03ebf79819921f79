package server

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"strom/rpc"
	stromv1 "strom/rpc/gen/strom/v1"
	"strom/server/coordinator"
	"strom/tablet/replica"

	"google.golang.org/protobuf/proto"
)

// Only an ineligible replica, which the coordinator checks after the bucket
// epoch, tells a leader its ISR change was not written (the leader then
// stops counting the joiners for its high watermark); a stale epoch or a
// failed call does not. The coordinator's answer counts the same from its
// own node and from another's.
func TestISRChangeErrorRefusedOnlyWhenNotWritten(t *testing.T) {
	remote := func(code rpc.Code) error {
		return rpc.ErrorOf(&stromv1.ErrorDetail{Code: code.Num, Name: code.Name, Message: "m"})
	}
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"ineligible", fmt.Errorf("table id 1 bucket 0: %w: node 3 is not live", coordinator.ErrIneligibleReplica), true},
		{"ineligible, from another node", fmt.Errorf("coordinator node 2: %w", remote(rpc.CodeIneligibleReplica)), true},
		{"stale bucket epoch", fmt.Errorf("x: %w", coordinator.ErrInvalidUpdateVersion), false},
		{"stale bucket epoch, from another node", remote(rpc.CodeInvalidUpdateVersion), false},
		{"fenced leader epoch", fmt.Errorf("x: %w", coordinator.ErrFencedLeaderEpoch), false},
		{"call failed", errors.New("connection reset"), false},
	} {
		got := isrChangeError(tc.err)
		if errors.Is(got, replica.ErrISRChangeRefused) != tc.refused {
			t.Errorf("%s: %v: refused %v, want %v", tc.name, got, !tc.refused, tc.refused)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%s: %v does not wrap %v", tc.name, got, tc.err)
		}
	}
	if isrChangeError(nil) != nil {
		t.Error("no error became one")
	}
}

// An ISR change crosses to the coordinator's node whole: the joiners' runs
// too, which the coordinator checks against their registrations.
func TestAdjustISRRequestOnTheWire(t *testing.T) {
	req := coordinator.AdjustISRRequest{TableID: 7, Bucket: 2, Leader: 1, LeaderEpoch: 3, BucketEpoch: 5,
		ISR: []int32{1, 2, 3}, Incarnations: map[int32]int64{2: 1234, 3: 5678}}
	data, err := proto.Marshal(adjustISRMessage(req))
	if err != nil {
		t.Fatal(err)
	}
	var m stromv1.AdjustIsrRequest
	if err := proto.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if got := adjustISRRequestOf(&m); !reflect.DeepEqual(got, req) {
		t.Fatalf("sent %+v, the coordinator reads %+v", req, got)
	}
}
