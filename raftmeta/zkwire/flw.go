package zkwire

import (
	"fmt"
	"net"
	"strings"
	"time"
)

// Version is the ZooKeeper version the shim reports (srvr, stat, mntr).
const Version = "3.9.3-strom"

// fourLetterWords are the commands answered on the client port. A
// connection whose first four bytes spell one gets the answer and is closed
// (ZooKeeper's NIOServerCnxn.checkFourLetterWord).
var fourLetterWords = map[string]bool{"ruok": true, "srvr": true, "stat": true, "mntr": true, "conf": true}

func isFourLetterWord(s string) bool { return fourLetterWords[s] }

func (c *conn) fourLetterWord(cmd string) {
	s := c.s
	var b strings.Builder
	switch cmd {
	case "ruok":
		b.WriteString("imok")
	case "srvr", "stat":
		fmt.Fprintf(&b, "Zookeeper version: %s, built on %s\n", Version, s.started.UTC().Format("01/02/2006 15:04 MST"))
		if cmd == "stat" {
			fmt.Fprintf(&b, "Clients:\n /%s[0](queued=0,recved=0,sent=0)\n\n", c.nc.RemoteAddr())
		}
		minL, avgL, maxL := s.latencyMs()
		fmt.Fprintf(&b, "Latency min/avg/max: %d/%.4f/%d\n", minL, avgL, maxL)
		fmt.Fprintf(&b, "Received: %d\n", s.received.Load())
		fmt.Fprintf(&b, "Sent: %d\n", s.sent.Load())
		fmt.Fprintf(&b, "Connections: %d\n", s.connCount())
		fmt.Fprintf(&b, "Outstanding: 0\n")
		fmt.Fprintf(&b, "Zxid: 0x%x\n", s.node.LastZxid())
		fmt.Fprintf(&b, "Mode: %s\n", s.mode())
		fmt.Fprintf(&b, "Node count: %d\n", s.node.NodeCount())
	case "mntr":
		minL, avgL, maxL := s.latencyMs()
		kv := []struct {
			k string
			v any
		}{
			{"zk_version", Version},
			{"zk_server_state", s.mode()},
			{"zk_avg_latency", fmt.Sprintf("%.4f", avgL)},
			{"zk_max_latency", maxL},
			{"zk_min_latency", minL},
			{"zk_packets_received", s.received.Load()},
			{"zk_packets_sent", s.sent.Load()},
			{"zk_num_alive_connections", s.connCount()},
			{"zk_outstanding_requests", 0},
			{"zk_znode_count", s.node.NodeCount()},
			{"zk_ephemerals_count", s.ephemeralCount()},
			{"zk_last_zxid", fmt.Sprintf("0x%x", s.node.LastZxid())},
			{"zk_uptime", time.Since(s.started).Milliseconds()},
		}
		for _, e := range kv {
			fmt.Fprintf(&b, "%s\t%v\n", e.k, e.v)
		}
	case "conf":
		_, port, _ := net.SplitHostPort(s.ln.Addr().String())
		fmt.Fprintf(&b, "clientPort=%s\n", port)
		fmt.Fprintf(&b, "clientPortAddress=%s\n", s.ln.Addr())
		fmt.Fprintf(&b, "dataDir=(raft)\n")
		fmt.Fprintf(&b, "tickTime=%d\n", s.cfg.MinSessionTimeout.Milliseconds()/2)
		fmt.Fprintf(&b, "maxClientCnxns=%d\n", s.cfg.MaxConnections)
		fmt.Fprintf(&b, "minSessionTimeout=%d\n", s.cfg.MinSessionTimeout.Milliseconds())
		fmt.Fprintf(&b, "maxSessionTimeout=%d\n", s.cfg.MaxSessionTimeout.Milliseconds())
		fmt.Fprintf(&b, "jute.maxbuffer=%d\n", s.cfg.MaxPacketSize)
		fmt.Fprintf(&b, "protectedRoot=%s\n", s.cfg.ProtectedRoot)
	}
	_, _ = c.bw.WriteString(b.String())
	_ = c.flush()
}

func (s *Server) latencyMs() (minL int64, avg float64, maxL int64) {
	n := s.latCount.Load()
	if n == 0 {
		return 0, 0, 0
	}
	return max(s.latMin.Load(), 0) / 1000, float64(s.latSum.Load()) / float64(n) / 1000, s.latMax.Load() / 1000
}

// mode is "standalone" for a one-member group, else leader or follower.
func (s *Server) mode() string {
	if srv, err := s.node.Servers(); err == nil && len(srv) == 1 {
		return "standalone"
	}
	if s.node.IsLeader() {
		return "leader"
	}
	return "follower"
}

func (s *Server) ephemeralCount() int {
	n := 0
	for _, sess := range s.node.Sessions() {
		n += len(s.node.Ephemerals(sess.ID))
	}
	return n
}
