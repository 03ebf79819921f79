package raft

import (
	"io"
	"testing"
	"time"
)

// TestPipelineDecoderExitReleasesSender is strom's test of its patch to
// pipelineDecode: a decoder that stops on a failed response closes the
// pipeline. With the default MaxRPCsInFlight of 2 both of the pipeline's
// channels are unbuffered; before the patch, once the decoder had returned the
// transport's response reader parked handing the next response to it, and the
// send after that parked in AppendEntries for ever. The replication goroutine
// then never left pipeline mode: the follower got heartbeats but no entries,
// and Raft's shutdown waited for it (hashicorp/raft#612; seen as a test
// cluster that never stopped).
func TestPipelineDecoderExitReleasesSender(t *testing.T) {
	leader, err := NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	follower, err := NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	go func() { // a follower refusing every append (its log does not match)
		for rpc := range follower.Consumer() {
			rpc.Respond(&AppendEntriesResponse{Term: 1, Success: false}, nil)
		}
	}()

	p, err := leader.AppendEntriesPipeline("f", follower.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := &Raft{}
	s := &followerReplication{peer: Server{ID: "f", Address: follower.LocalAddr()}}
	stopCh, finishCh := make(chan struct{}), make(chan struct{})
	go r.pipelineDecode(s, p, stopCh, finishCh)

	req := func() *AppendEntriesRequest {
		return &AppendEntriesRequest{RPCHeader: RPCHeader{ProtocolVersion: ProtocolVersionMax}, Term: 1}
	}
	if _, err := p.AppendEntries(req(), new(AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	<-finishCh // the decoder returned on the refusal

	// What pipelineReplicate's loop may still send before it sees finishCh:
	// every send must come back, with an error once the pipeline is closed.
	sent := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			_, err = p.AppendEntries(req(), new(AppendEntriesResponse))
		}
		sent <- err
	}()
	select {
	case err := <-sent:
		if err == nil {
			t.Fatal("sends on a pipeline whose decoder stopped succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a send on a pipeline whose decoder stopped never returned")
	}
}
