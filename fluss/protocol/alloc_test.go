//go:build !race

package protocol

import "testing"

// Messages allocates the two messages it returns and nothing else: the
// listener calls it for every request, and it used to build each key's
// message names (ToLower, Split, concatenations) and look them up in the
// registry every time.
func TestMessagesAllocatesOnlyTheMessages(t *testing.T) {
	Messages(Lookup) // the types are found once
	if n := testing.AllocsPerRun(100, func() { Messages(Lookup) }); n > 2 {
		t.Fatalf("Messages(LOOKUP) allocates %.0f times, want 2 (the request and the response)", n)
	}
}
