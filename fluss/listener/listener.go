// Package listener serves Apache Fluss's protocol on a TCP address
// (fluss.listen; fluss/DESIGN.md). So far it answers API_VERSIONS only: with
// the keys and version ranges Strom is to serve, so that a Fluss client picks
// the versions it will use. Every other request gets a Fluss error response
// (UNSUPPORTED_VERSION, naming the API) on a connection that stays open; a
// frame that cannot be parsed gets a server failure and the connection is
// closed, as Fluss's own server does.
package listener

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"strom/fluss/gen/flusspb"
	"strom/fluss/protocol"
	"strom/fluss/wire"
)

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("listener: invalid config")

// Config configures a Server.
type Config struct {
	// MaxRequestBytes is the largest request frame, in bytes, the length
	// field not counted (netty.server.max-request-size, Fluss's name and
	// default: 100 MiB).
	MaxRequestBytes int64
	// IdleTimeout closes a connection that sends no request for this long,
	// or stalls inside one (netty.connection.max-idle-time, Fluss's name and
	// default: 10 minutes); 0 never does.
	IdleTimeout time.Duration
	// Logger receives connection errors; nil discards them.
	Logger *slog.Logger
}

// Validate reports every problem of c, each naming its config key.
func (c Config) Validate() error {
	var problems []error
	if c.MaxRequestBytes < wire.RequestHeaderLen || c.MaxRequestBytes >= 1<<31 {
		problems = append(problems, fmt.Errorf("%w: netty.server.max-request-size: want %d bytes to 2 GiB, got %d", ErrConfig, wire.RequestHeaderLen, c.MaxRequestBytes))
	}
	if c.IdleTimeout < 0 {
		problems = append(problems, fmt.Errorf("%w: netty.connection.max-idle-time: want ≥ 0, got %s", ErrConfig, c.IdleTimeout))
	}
	return errors.Join(problems...)
}

// Served are the API keys Strom is to serve to Fluss clients (issue #17's
// list), answered by API_VERSIONS with Fluss 0.9.1's version ranges. Only
// API_VERSIONS is implemented yet; the others answer UNSUPPORTED_VERSION.
var Served = []protocol.APIKey{
	protocol.ApiVersions,
	protocol.CreateDatabase, protocol.DropDatabase, protocol.ListDatabases, protocol.DatabaseExists,
	protocol.CreateTable, protocol.DropTable, protocol.GetTableInfo, protocol.ListTables, protocol.TableExists,
	protocol.GetMetadata, protocol.ProduceLog, protocol.FetchLog, protocol.PutKv, protocol.Lookup,
	protocol.PrefixLookup, protocol.ListOffsets, protocol.InitWriter, protocol.LimitScan,
	protocol.GetTableStats, protocol.GetLatestKvSnapshots, protocol.GetFilesystemSecurityToken,
	protocol.DropKvSnapshotLease, protocol.GetLakeSnapshot, protocol.LakeTieringHeartbeat,
	protocol.PrepareLakeTableSnapshot, protocol.CommitLakeTableSnapshot,
}

// Server serves Fluss's protocol on one listener.
type Server struct {
	ln       net.Listener
	cfg      Config
	lg       *slog.Logger
	versions *flusspb.ApiVersionsResponse // the same for every request; only read

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start serves ln in background goroutines and returns at once. The Server
// owns ln from then on and Close closes it; on an error the caller still
// owns it.
func Start(ln net.Listener, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	resp := &flusspb.ApiVersionsResponse{} // no server_type: a node is coordinator and tablet server at once
	for _, k := range Served {
		info, _ := protocol.Info(k)
		resp.ApiVersions = append(resp.ApiVersions, &flusspb.PbApiVersion{
			ApiKey: proto.Int32(int32(k)), MinVersion: proto.Int32(int32(info.MinVersion)), MaxVersion: proto.Int32(int32(info.MaxVersion))})
	}
	s := &Server{ln: ln, cfg: cfg, lg: lg, versions: resp, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the Server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, closes every connection and waits for their
// goroutines to end.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.lg.Error("fluss listener stopped accepting", "err", err)
			}
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve answers c's requests in order until c ends or sends a frame that
// cannot be parsed.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := wire.NewReader(c, int(s.cfg.MaxRequestBytes), "netty.server.max-request-size")
	var out []byte
	for {
		if s.cfg.IdleTimeout > 0 {
			c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		frame, err := r.ReadFrame()
		var h wire.RequestHeader
		var body []byte
		if err == nil {
			h, body, err = wire.ParseRequest(frame)
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.lg.Debug("fluss connection closed: idle for netty.connection.max-idle-time", "remote", c.RemoteAddr().String())
			} else if err != io.EOF && !errors.Is(err, net.ErrClosed) {
				s.lg.Info("fluss connection closed on a bad frame", "remote", c.RemoteAddr().String(), "err", err)
				if errors.Is(err, wire.ErrFrameTooLarge) || errors.Is(err, wire.ErrMalformed) {
					out, _ = wire.AppendServerFailure(out[:0], protocol.CorruptMessage, err.Error())
					c.Write(out)
				}
			}
			return
		}
		out, err = s.handle(out[:0], h, body)
		if err == nil {
			_, err = c.Write(out)
		}
		if err != nil {
			s.lg.Info("fluss connection closed", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
	}
}

// handle appends the response frame to request h with body to dst.
func (s *Server) handle(dst []byte, h wire.RequestHeader, body []byte) ([]byte, error) {
	info, known := protocol.Info(h.APIKey)
	switch {
	case !known:
		return wire.AppendError(dst, h.RequestID, protocol.UnsupportedVersion,
			fmt.Sprintf("unknown API key %d: not one of Fluss 0.9.1's", h.APIKey))
	case h.APIKey != protocol.ApiVersions:
		return wire.AppendError(dst, h.RequestID, protocol.UnsupportedVersion,
			fmt.Sprintf("Strom does not serve %s yet: its Fluss listener serves only API_VERSIONS so far", h.APIKey))
	case h.APIVersion < info.MinVersion || h.APIVersion > info.MaxVersion:
		return wire.AppendError(dst, h.RequestID, protocol.UnsupportedVersion,
			fmt.Sprintf("%s version %d is not supported: Strom serves versions %d to %d", h.APIKey, h.APIVersion, info.MinVersion, info.MaxVersion))
	}
	if err := proto.Unmarshal(body, new(flusspb.ApiVersionsRequest)); err != nil {
		return wire.AppendError(dst, h.RequestID, protocol.CorruptMessage, fmt.Sprintf("%s request body: %v", h.APIKey, err))
	}
	return wire.AppendResponse(dst, h.RequestID, s.versions)
}
