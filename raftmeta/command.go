package raftmeta

import (
	"fmt"
	"time"
)

// CommandType is the first byte of every Raft log entry this package writes.
// Values are only ever appended, never reused or renumbered. A type with
// IgnoreUnknownFlag set may be skipped by a node that does not know it (a
// rolling upgrade); any other unknown type stops the FSM, because applying
// the log without it would diverge from the other replicas.
type CommandType uint8

const (
	// IgnoreUnknownFlag marks a command an older node may skip.
	IgnoreUnknownFlag CommandType = 0x80

	CmdNoop            CommandType = 1 // a barrier: changes nothing
	CmdCreateSession   CommandType = 2 // a new session; its id is the entry's index
	CmdCloseSession    CommandType = 3 // client closed a session
	CmdExpireSession   CommandType = 4 // leader expired a silent session
	CmdOp              CommandType = 5 // one operation (Do)
	CmdMulti           CommandType = 6 // atomic operations (Multi)
	CmdDeleteContainer CommandType = 7 // leader reaps an empty container or expired TTL node
)

func (t CommandType) String() string {
	switch t &^ IgnoreUnknownFlag {
	case CmdNoop:
		return "noop"
	case CmdCreateSession:
		return "createSession"
	case CmdCloseSession:
		return "closeSession"
	case CmdExpireSession:
		return "expireSession"
	case CmdOp:
		return "op"
	case CmdMulti:
		return "multi"
	case CmdDeleteContainer:
		return "deleteContainer"
	}
	return fmt.Sprintf("unknown(%d)", uint8(t))
}

// commandLevels is the cluster feature level each command type came with
// (Config.FeatureLevel); a type not listed is of level 0, the first
// release's. A new command type gets the level of the release that adds it,
// so that it is proposed only once every node knows it: see DESIGN.md,
// "Rolling upgrades".
var commandLevels = map[CommandType]int{}

// commandLevel is the feature level of t.
func commandLevel(t CommandType) int { return commandLevels[t&^IgnoreUnknownFlag] }

// command is a decoded log entry. Which fields are used depends on Type.
type command struct {
	Type  CommandType
	Nonce uint64 // proposer-local request id, so the proposer can find its result; 0: none
	Time  int64  // proposer's clock, ms since epoch: ctime/mtime and TTL expiry

	Session  int64  // CmdOp, CmdMulti: the session the ops run in (0: none); CmdCloseSession, CmdExpireSession: the session
	Ops      []Op   // CmdOp (exactly one), CmdMulti
	Timeout  int64  // CmdCreateSession: ms
	Password []byte // CmdCreateSession
	Path     string // CmdDeleteContainer

	// from is the NodeID of the node a forwarded CmdOp or CmdMulti came
	// from, "" for one made on this node; Config.CheckWrite sees it. Not
	// encoded: the log entry does not carry it.
	from string
}

// commandHeaderSize is type u8 + nonce u64 + time i64.
const commandHeaderSize = 1 + 8 + 8

// minOpSize is the encoded size of the smallest op.
const minOpSize = 1 + 4 + 4 + 1 + 4 + 8 + 4

// commandCodec encodes and decodes the body of one command type.
type commandCodec struct {
	encode func(e *encoder, c *command)
	decode func(d *decoder, c *command)
}

// commandCodecs is the dispatch table of body codecs; the matching apply
// handlers are in fsm.go.
var commandCodecs = map[CommandType]commandCodec{
	CmdNoop: {
		encode: func(*encoder, *command) {},
		decode: func(*decoder, *command) {},
	},
	CmdCreateSession: {
		encode: func(e *encoder, c *command) {
			e.i64(c.Timeout)
			e.bytes(c.Password)
		},
		decode: func(d *decoder, c *command) {
			c.Timeout = d.i64("session timeout")
			c.Password = d.bytes("session password")
		},
	},
	CmdCloseSession:  {encode: encodeSessionID, decode: decodeSessionID},
	CmdExpireSession: {encode: encodeSessionID, decode: decodeSessionID},
	CmdOp: {
		encode: func(e *encoder, c *command) {
			e.i64(c.Session)
			encodeOp(e, &c.Ops[0])
		},
		decode: func(d *decoder, c *command) {
			c.Session = d.i64("session")
			var op Op
			decodeOp(d, &op)
			c.Ops = []Op{op}
		},
	},
	CmdMulti: {
		encode: func(e *encoder, c *command) {
			e.i64(c.Session)
			e.u32(uint32(len(c.Ops)))
			for i := range c.Ops {
				encodeOp(e, &c.Ops[i])
			}
		},
		decode: func(d *decoder, c *command) {
			c.Session = d.i64("session")
			n := d.u32("op count")
			if d.err != nil {
				return
			}
			if uint64(n) > uint64(d.remaining()/minOpSize) {
				d.fail("op count %d exceeds input", n)
				return
			}
			c.Ops = make([]Op, n)
			for i := range c.Ops {
				decodeOp(d, &c.Ops[i])
			}
		},
	},
	CmdDeleteContainer: {
		encode: func(e *encoder, c *command) { e.str(c.Path) },
		decode: func(d *decoder, c *command) { c.Path = d.str("path") },
	},
}

func encodeSessionID(e *encoder, c *command) { e.i64(c.Session) }
func decodeSessionID(d *decoder, c *command) { c.Session = d.i64("session id") }

func encodeOp(e *encoder, op *Op) {
	e.u8(uint8(op.Kind))
	e.str(op.Path)
	e.bytes(op.Data)
	e.u8(uint8(op.Mode))
	e.i32(op.Version)
	e.i64(op.TTL.Milliseconds())
	e.acls(op.ACL)
}

func decodeOp(d *decoder, op *Op) {
	op.Kind = OpKind(d.u8("op kind"))
	if d.err == nil && !op.Kind.valid() {
		d.fail("unknown op kind %d", op.Kind)
	}
	op.Path = d.str("op path")
	op.Data = d.bytes("op data")
	op.Mode = CreateMode(d.u8("op mode"))
	if d.err == nil && !op.Mode.valid() {
		d.fail("unknown create mode %d", op.Mode)
	}
	op.Version = d.i32("op version")
	ttl := d.i64("op ttl")
	if d.err == nil && (ttl < 0 || ttl > int64(ttlValueMask)) {
		d.fail("op ttl %d out of range", ttl)
	}
	op.TTL = time.Duration(ttl) * time.Millisecond
	op.ACL = d.acls("op acl")
}

// encodeCommand returns the log entry for c. The caller has validated the
// op kinds and modes (decodeCommand rejects unknown ones).
func encodeCommand(c *command) []byte {
	codec, ok := commandCodecs[c.Type&^IgnoreUnknownFlag]
	if !ok {
		panic(fmt.Sprintf("raftmeta: encode of unknown command type %d", c.Type))
	}
	e := &encoder{b: make([]byte, 0, 64)}
	e.u8(uint8(c.Type))
	e.u64(c.Nonce)
	e.i64(c.Time)
	codec.encode(e, c)
	return e.b
}

// errUnknownCommand marks an entry whose type this node does not know.
type errUnknownCommand struct{ typ CommandType }

func (e errUnknownCommand) Error() string {
	return fmt.Sprintf("raftmeta: unknown command type %d", uint8(e.typ))
}

// decodeCommand parses a log entry. It returns a clean error, never a panic,
// for any input: errUnknownCommand for an unknown type (the header is still
// filled in), or an error wrapping ErrCorrupt.
func decodeCommand(b []byte) (*command, error) {
	d := &decoder{b: b}
	c := &command{}
	c.Type = CommandType(d.u8("command type"))
	c.Nonce = d.u64("nonce")
	c.Time = d.i64("time")
	if d.err != nil {
		return nil, d.err
	}
	codec, ok := commandCodecs[c.Type&^IgnoreUnknownFlag]
	if !ok {
		return c, errUnknownCommand{typ: c.Type}
	}
	codec.decode(d, c)
	d.end(c.Type.String() + " command")
	if d.err != nil {
		return nil, d.err
	}
	return c, nil
}

// newCommand returns a command stamped with the proposer's clock.
func newCommand(t CommandType) *command {
	return &command{Type: t, Time: time.Now().UnixMilli()}
}
