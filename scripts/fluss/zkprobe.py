# zkprobe.py HOST:PORT owners PATH...        each PATH's ephemeralOwner ("PATH 0x<session>", 0x0 for a
#                                           persistent node) or "PATH absent"
# zkprobe.py HOST:PORT wait-absent PATH SECS  poll PATH (exists, every 50 ms) until it is gone; print
#                                           the epoch time it was first seen absent; exit 1 if it is
#                                           still there after SECS
# A raw-protocol ZooKeeper client for scripts/fluss.sh (no dependencies): one session per run,
# closed at exit. Exit 2 when the server cannot be reached or answers an error other than NoNode.
import socket, struct, sys, time

NONODE = -101

class ZK:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.xid = 0
        # protocolVersion, lastZxidSeen, timeOut (ms), sessionId, passwd (16 zero bytes), readOnly
        self.send(struct.pack(">iqiqi16s?", 0, 0, 30000, 0, 16, b"\0" * 16, False))
        if len(self.recv()) < 16:
            raise OSError("no session from %s" % addr)

    def send(self, body):
        self.s.sendall(struct.pack(">i", len(body)) + body)

    def recv(self):
        n = struct.unpack(">i", self.read(4))[0]
        return self.read(n)

    def read(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise OSError("connection closed")
            b += c
        return b

    def call(self, op, payload):
        self.xid += 1
        self.send(struct.pack(">ii", self.xid, op) + payload)
        while True:
            b = self.recv()
            xid, _, err = struct.unpack(">iqi", b[:16])
            if xid == self.xid:
                return err, b[16:]

    def owner(self, path):
        """The ephemeralOwner of path, or None when it does not exist."""
        p = path.encode()
        err, body = self.call(3, struct.pack(">i%ds?" % len(p), len(p), p, False))  # exists, no watch
        if err == NONODE:
            return None
        if err != 0:
            raise OSError("exists %s: error %d" % (path, err))
        return struct.unpack(">q", body[44:52])[0]  # czxid mzxid ctime mtime, 3 versions, owner

    def close(self):
        try:
            self.call(-11, b"")
        except OSError:
            pass
        self.s.close()

def main():
    addr, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        zk = ZK(addr)
    except OSError as e:
        print("zkprobe: %s: %s" % (addr, e), file=sys.stderr)
        return 2
    try:
        if cmd == "owners":
            for p in args:
                o = zk.owner(p)
                print("%s %s" % (p, "absent" if o is None else "0x%x" % o))
            return 0
        if cmd == "wait-absent":
            path, deadline = args[0], time.time() + float(args[1])
            while zk.owner(path) is not None:
                if time.time() > deadline:
                    return 1
                time.sleep(0.05)
            print("%.3f" % time.time())
            return 0
        print("zkprobe: unknown command %s" % cmd, file=sys.stderr)
        return 2
    except OSError as e:
        print("zkprobe: %s: %s" % (addr, e), file=sys.stderr)
        return 2
    finally:
        zk.close()

sys.exit(main())
