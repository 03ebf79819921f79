package client

// NoPrefetch makes a LogScanner fetch as it did before prefetching: Poll
// sends the fetches and waits for all of them, and sends none before it
// returns. For benchmarks comparing the two.
func NoPrefetch() ScanOption { return func(c *scanConfig) { c.noPrefetch = true } }
