package client

// NoPrefetch makes a LogScanner fetch as it did before prefetching: Poll
// sends the fetches and waits for all of them, and sends none before it
// returns. For benchmarks comparing the two.
func NoPrefetch() ScanOption { return func(c *scanConfig) { c.noPrefetch = true } }

// BuildInAppend makes a writer build (encode and compress) each batch as
// it did before building moved to the bucket's sender: in the appending
// goroutine, under the writer's lock. For benchmarks comparing the two.
func BuildInAppend() WriterOption { return func(c *writerConfig) { c.buildInAppend = true } }

// BeforeDecode makes a LogScanner call f before it decodes each answer.
func BeforeDecode(f func()) ScanOption { return func(c *scanConfig) { c.beforeDecode = f } }

// FetchAfterDecode makes a LogScanner fetch a bucket again only once its
// last answer is decoded and polled, as it did before it fetched while
// decoding. For benchmarks comparing the two.
func FetchAfterDecode() ScanOption { return func(c *scanConfig) { c.afterDecode = true } }

// QueuedAnswers reports how many answers wait for the scanner's decoder.
func QueuedAnswers(s *LogScanner) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.queue)
}
