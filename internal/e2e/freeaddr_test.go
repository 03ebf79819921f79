package e2e

import "testing"

// TestFreeAddrNeverRepeats: listen-and-close on port 0 can hand out a port
// it handed out before; freeAddr never returns an address twice in one test
// binary, so two nodes of a test never get the same port.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		a := freeAddr(t)
		if seen[a] {
			t.Fatalf("freeAddr returned %s twice", a)
		}
		seen[a] = true
	}
}
