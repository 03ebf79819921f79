package zkwire

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"strom/raftmeta"
)

// benchShim serves a node with bolt stores on disk (as in production) and
// returns clients connected to it.
func benchShim(b *testing.B, clients int) []*zk.Conn {
	cfg := raftmeta.DefaultConfig()
	cfg.NodeID = "1"
	cfg.Dir = b.TempDir()
	cfg.BindAddr = "127.0.0.1:0"
	cfg.Bootstrap = true
	n, err := raftmeta.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitLeader(ctx); err != nil {
		b.Fatal(err)
	}
	s := startServer(b, n, DefaultConfig())
	var conns []*zk.Conn
	for range clients {
		c, _, err := zk.Connect([]string{s.Addr().String()}, 10*time.Second, zk.WithLogger(zkLogger{b}))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		conns = append(conns, c)
	}
	return conns
}

// BenchmarkGetData: parallel getData over 4 sessions.
func BenchmarkGetData(b *testing.B) {
	conns := benchShim(b, 4)
	if _, err := conns[0].Create("/bench", make([]byte, 100), 0, openACL); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := conns[next.Add(1)%int64(len(conns))]
		for pb.Next() {
			if _, _, err := c.Get("/bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCreateDelete: parallel create+delete pairs over 4 sessions.
func BenchmarkCreateDelete(b *testing.B) {
	conns := benchShim(b, 4)
	var next, ids atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := conns[next.Add(1)%int64(len(conns))]
		for pb.Next() {
			p := fmt.Sprintf("/n%d", ids.Add(1))
			if _, err := c.Create(p, make([]byte, 100), 0, openACL); err != nil {
				b.Error(err)
				return
			}
			if err := c.Delete(p, -1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
