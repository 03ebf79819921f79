// Package catalog is the typed layer over the metadata tree: the only code
// that knows the znode paths and the JSON shapes stored in them. The layout
// and shapes are Fluss's (its ZkData and *JsonSerde classes), rooted at
// /strom instead of /fluss.
//
// Reads come from the local replica of the tree. Writes are built here as
// raftmeta operations and carried out by the coordinator, which wraps them in
// a multi that checks its epoch, so a deposed coordinator cannot write.
package catalog
