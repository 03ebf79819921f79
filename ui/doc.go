// Package ui serves Strom's web console on /ui of the API port: static
// HTML, CSS and JavaScript embedded in the binary (no CDN, no build step),
// which call the node's own Connect API with its HTTP+JSON protocol and
// poll its /metrics.
//
// The console only reads. The one piece of server-side logic is a
// forwarder for the data-path reads a bucket's leader must answer
// (DescribeBuckets, FetchLog, ListOffsets, Lookup): the browser may only
// call the origin it loaded the console from, so it asks
// /ui/node/<id>/<method> and this node sends the call on to node <id>'s
// API address, as the metadata names it. Nothing else is forwarded.
package ui
