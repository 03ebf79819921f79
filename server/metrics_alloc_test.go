//go:build !race

package server

import "testing"

// What produce and fetch add for /metrics allocates nothing: counting a
// bucket's and the node's rows and bytes (the request metrics' part is
// metrics.TestHotPathAllocatesNothing).
func TestTrafficCountingAllocatesNothing(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	info := createTable(t, s, "demo", "t", "id BIGINT", 1)
	waitReplicas(t, s, info)
	r, err := s.replicas.Replica(replicaTB(info.TableId, 0))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { s.countIn(r, 10, 1000); s.countOut(r, 10, 1000) }); n != 0 {
		t.Fatalf("%v allocations per produce and fetch", n)
	}
}
