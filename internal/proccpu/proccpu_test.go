package proccpu

import (
	"os"
	"testing"
	"time"
)

// parseStat reads utime and stime after the command name, which may hold
// spaces and parentheses.
func TestParseStat(t *testing.T) {
	line := "4242 (java (main) x) S 1 4242 4242 0 -1 4194560 9000 0 12 0 350 125 0 0 20 0 40 0 1234 5678 910\n"
	d, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 475 * clockTick; d != want {
		t.Fatalf("parseStat = %v, want %v (utime 350 + stime 125 ticks)", d, want)
	}
	if _, err := parseStat("4242 (x) S 1 2"); err == nil {
		t.Fatal("a short line parsed")
	}
}

// Self and Of(own pid) both see this process spin.
func TestSelfAndOf(t *testing.T) {
	self0 := Self()
	of0, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	of1, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if Self() <= self0 || of1 <= of0 {
		t.Fatalf("no CPU time seen: Self %v -> %v, Of %v -> %v", self0, Self(), of0, of1)
	}
	if _, err := Of(-1); err == nil {
		t.Fatal("Of(-1) read something")
	}
}
