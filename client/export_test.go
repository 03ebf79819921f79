package client

// NoPrefetch makes a LogScanner fetch as it did before prefetching: Poll
// sends the fetches and waits for all of them, and sends none before it
// returns. For benchmarks comparing the two.
func NoPrefetch() ScanOption { return func(c *scanConfig) { c.noPrefetch = true } }

// BuildInAppend makes a writer build (encode and compress) each batch as
// it did before building moved to the bucket's sender: in the appending
// goroutine, under the writer's lock. For benchmarks comparing the two.
func BuildInAppend() WriterOption { return func(c *writerConfig) { c.buildInAppend = true } }
