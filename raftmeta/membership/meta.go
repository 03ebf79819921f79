package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// metaVersion is the first byte of a node's encoded metadata. A node
// refuses metadata of a version it does not know (ErrMeta), so a field is
// added by bumping it and decoding both.
const metaVersion = 1

// maxMeta is memberlist's limit on a node's metadata (MetaMaxSize).
const maxMeta = 512

// ErrMeta: a node's gossiped metadata does not decode.
var ErrMeta = errors.New("membership: bad node metadata")

// Meta is what a node tells the others about itself.
type Meta struct {
	// ID is the node id (node.id).
	ID int32
	// API, Raft and Gossip are the node's advertised addresses, host:port.
	API, Raft, Gossip string
	// Rack is the node's rack (node.rack), "" when none.
	Rack string
	// Version is the Strom version the node runs.
	Version string
	// ClusterID is the cluster the node belongs to, "" while it has not
	// joined one yet (a fresh node).
	ClusterID string
	// Roles are the node's roles ("metadata", "tablet").
	Roles []string
	// HasState reports that the node holds metadata (Raft) state: it has
	// bootstrapped or joined a metadata group, so it must never bootstrap.
	HasState bool
	// Leaving is set by a node just before it leaves gracefully, so the
	// others tell its leave from a failure.
	Leaving bool
}

// encode is: version u8 | id i32 | flags u8 (bit 0: HasState, bit 1:
// Leaving) | then
// api, raft, gossip, rack, version, cluster id, roles (comma-joined),
// each u16 length then bytes. Big-endian.
func (m Meta) encode() []byte {
	b := []byte{metaVersion}
	b = binary.BigEndian.AppendUint32(b, uint32(m.ID))
	var flags byte
	if m.HasState {
		flags |= 1
	}
	if m.Leaving {
		flags |= 2
	}
	b = append(b, flags)
	for _, s := range []string{m.API, m.Raft, m.Gossip, m.Rack, m.Version, m.ClusterID, strings.Join(m.Roles, ",")} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) < 6 {
		return m, fmt.Errorf("%w: %d bytes", ErrMeta, len(b))
	}
	if b[0] != metaVersion {
		return m, fmt.Errorf("%w: version %d, want %d (is the node running another Strom version?)", ErrMeta, b[0], metaVersion)
	}
	m.ID = int32(binary.BigEndian.Uint32(b[1:]))
	m.HasState, m.Leaving = b[5]&1 != 0, b[5]&2 != 0
	b = b[6:]
	var roles string
	for _, f := range []*string{&m.API, &m.Raft, &m.Gossip, &m.Rack, &m.Version, &m.ClusterID, &roles} {
		if len(b) < 2 {
			return m, fmt.Errorf("%w: truncated", ErrMeta)
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return m, fmt.Errorf("%w: truncated", ErrMeta)
		}
		*f, b = string(b[2:2+n]), b[2+n:]
	}
	if len(b) != 0 {
		return m, fmt.Errorf("%w: %d trailing bytes", ErrMeta, len(b))
	}
	if roles != "" {
		m.Roles = strings.Split(roles, ",")
	}
	return m, nil
}
