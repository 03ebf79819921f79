// Package remote is Strom's remote storage: the cheap, shared home of cold
// data (tiered log segments and KV snapshots; Fluss's remote.data.dir).
//
// A Store holds objects named by slash-separated keys. Open makes one from
// a URL: file:///path or file://./relative for a directory (tests, single
// nodes, a mounted NFS), s3://bucket/prefix for anything that speaks S3
// (AWS, or an S3-compatible server through Options.S3.Endpoint). Both
// backends pass the one conformance suite in remote/storetest.
//
// Every backend gives the same guarantees: a Put is atomic (readers see
// the whole new object or the old one, never part of one, and a Put that
// fails or is cancelled leaves nothing visible), Put streams its reader
// with a bounded buffer whatever the object's size, Delete is idempotent,
// and every error names the object's key and wraps one of the package's
// sentinels where one applies (ErrNotFound, ErrUnavailable, ...).
//
// The package does not know what the objects mean: the layout of tiered
// segments, manifests and snapshots belongs to its callers.
package remote
