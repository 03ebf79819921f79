# zktrace.py PORT UPSTREAM_HOST:PORT LOGFILE: a ZooKeeper proxy for scripts/fluss.sh (ZK_TRACE=1).
# It forwards every packet unchanged and logs each request (op, path, addWatch mode, packet size
# without the length prefix) and each reply (xid, err, body size) to LOGFILE, one line each:
# "<time> #<conn> C>|S< ...".
# ZK_TRACE_LATE=REGEX: a NodeCreated event whose path matches REGEX reaches the client 0.5 s late,
# after the frames behind it, as if the client's event thread were that late (fault injection).
import os, re, socket, struct, sys, threading, time
OPS = {1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 6: "getACL", 7: "setACL",
       8: "getChildren", 9: "sync", 11: "ping", 12: "getChildren2", 13: "check", 14: "multi", 15: "create2",
       16: "reconfig", 17: "checkWatches", 18: "removeWatches", 19: "createContainer", 20: "deleteContainer",
       21: "createTTL", 22: "multiRead", 100: "auth", 101: "setWatches", 102: "sasl", 103: "getEphemerals",
       104: "getAllChildrenNumber", 105: "setWatches2", 106: "addWatch", 107: "whoAmI", -11: "closeSession"}
PATH_OPS = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 17, 18, 19, 20, 21, 103, 104, 106}
port, (uh, up), out = int(sys.argv[1]), sys.argv[2].rsplit(":", 1), open(sys.argv[3], "a", buffering=1)
lock = threading.Lock()
LATE = re.compile(os.environ["ZK_TRACE_LATE"]) if os.environ.get("ZK_TRACE_LATE") else None
def log(s):
    with lock: out.write("%.3f %s\n" % (time.time(), s))
def read(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: return None
        b += c
    return b
def setwatches(body): # relZxid and the watch lists of a setWatches(2) request
    try:
        out, o = " relZxid=0x%x" % struct.unpack(">q", body[8:16])[0], 16
        for kind in ("data", "exist", "child", "persistent", "recursive"):
            if o >= len(body): break
            n, o, paths = struct.unpack(">i", body[o:o + 4])[0], o + 4, []
            for _ in range(max(n, 0)):
                pl = struct.unpack(">i", body[o:o + 4])[0]
                paths.append(body[o + 4:o + 4 + pl].decode("utf-8", "replace")); o += 4 + pl
            out += " %s=[%s]" % (kind, ",".join(paths))
        return out
    except struct.error:
        return " (undecodable)"
def pipe(src, dst, cid, d, pending):
    first, wlock = True, threading.Lock() # wlock: this direction's writes (a late event's timer too)
    def send(b):
        with wlock: dst.sendall(b)
    try:
        while True:
            h = read(src, 4)
            body = read(src, struct.unpack(">i", h)[0]) if h else None
            if body is None:
                log("#%d %s EOF" % (cid, d)); break
            if first:
                log("#%d %s session %s (%d bytes)" % (cid, d, "request" if d == "C>" else "reply", len(body)))
            elif d == "C>":
                xid, op = struct.unpack(">ii", body[:8]); path, extra = "", ""
                if op in PATH_OPS and len(body) >= 12:
                    pl = struct.unpack(">i", body[8:12])[0]
                    if 0 <= pl <= len(body) - 12:
                        path = body[12:12 + pl].decode("utf-8", "replace")
                        if op == 106 and len(body) >= 16 + pl: extra = " mode=%d" % struct.unpack(">i", body[12 + pl:16 + pl])[0]
                pending[xid] = OPS.get(op, "op%d" % op)
                if op in (101, 105): extra = setwatches(body)
                if op != 11: log("#%d C> xid=%d %s %s%s len=%d" % (cid, xid, pending[xid], path, extra, len(body)))
            else:
                xid, zxid, err = struct.unpack(">iqi", body[:16])
                name = pending.pop(xid, "?") if xid >= 0 else {-1: "watch-event", -2: "ping", -4: "auth", -8: "setWatches"}.get(xid, "?")
                late = False
                if xid == -1 and len(body) >= 28: # WatcherEvent: type, state, path
                    t, st, pl = struct.unpack(">iii", body[16:28]); path = body[28:28 + pl].decode("utf-8", "replace")
                    name += " type=%d state=%d %s" % (t, st, path)
                    late = t == 1 and LATE is not None and LATE.search(path) is not None
                if xid != -2: log("#%d S< xid=%d zxid=0x%x %s err=%d body=%d bytes%s" % (cid, xid, zxid, name, err, len(body) - 16, " (sent 0.5 s late)" if late else ""))
                if late:
                    first = False; threading.Timer(0.5, send, (h + body,)).start(); continue
            first = False
            send(h + body)
    except Exception as e:
        log("#%d %s error %r" % (cid, d, e))
    for s in (src, dst):
        try: s.shutdown(socket.SHUT_RDWR)
        except Exception: pass
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port)); srv.listen(64); n = 0
while True:
    c, _ = srv.accept(); n += 1; pending = {}
    try: u = socket.create_connection((uh, int(up)))
    except OSError as e:
        log("#%d upstream %r" % (n, e)); c.close(); continue
    log("#%d open" % n)
    for a, b, d in ((c, u, "C>"), (u, c, "S<")):
        threading.Thread(target=pipe, args=(a, b, n, d, pending), daemon=True).start()
