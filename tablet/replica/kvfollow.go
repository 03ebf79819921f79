package replica

import "strom/tablet/kv"

// LocalKV returns the replica's KV tablet (nil for a log table) whatever
// its role, for checks and diagnostics: on a follower it holds the rows
// below the follower's high watermark, which may lag the leader's. Clients
// read through KV, on the leader.
func (r *Replica) LocalKV() *kv.Tablet { return r.kv }
