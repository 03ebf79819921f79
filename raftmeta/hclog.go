package raftmeta

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter bridges hashicorp's hclog.Logger (used by raft, its
// transport and snapshot store) to an injected slog.Logger.
type hclogAdapter struct {
	lg      *slog.Logger // carries the implied args
	name    string
	implied []any
}

func newHCLogger(lg *slog.Logger) hclog.Logger { return &hclogAdapter{lg: lg} }

var _ hclog.Logger = (*hclogAdapter)(nil)

// slogLevelTrace sits below slog's Debug.
const slogLevelTrace = slog.LevelDebug - 4

func toSlogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slogLevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	lvl := toSlogLevel(level)
	ctx := context.Background()
	if !h.lg.Enabled(ctx, lvl) {
		return
	}
	out := make([]any, 0, len(args)+2)
	for _, a := range args {
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				a = fmt.Sprintf(format, f[1:]...)
			}
		}
		out = append(out, a)
	}
	if h.name != "" {
		out = append(out, "logger", h.name)
	}
	h.lg.Log(ctx, lvl, msg, out...)
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) enabled(l slog.Level) bool { return h.lg.Enabled(context.Background(), l) }

func (h *hclogAdapter) IsTrace() bool { return h.enabled(slogLevelTrace) }
func (h *hclogAdapter) IsDebug() bool { return h.enabled(slog.LevelDebug) }
func (h *hclogAdapter) IsInfo() bool  { return h.enabled(slog.LevelInfo) }
func (h *hclogAdapter) IsWarn() bool  { return h.enabled(slog.LevelWarn) }
func (h *hclogAdapter) IsError() bool { return h.enabled(slog.LevelError) }

func (h *hclogAdapter) ImpliedArgs() []any { return h.implied }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{
		lg:      h.lg.With(args...),
		name:    h.name,
		implied: append(append([]any(nil), h.implied...), args...),
	}
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	n := name
	if h.name != "" {
		n = h.name + "." + name
	}
	return &hclogAdapter{lg: h.lg, name: n, implied: h.implied}
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{lg: h.lg, name: name, implied: h.implied}
}

// SetLevel does nothing: the slog handler decides.
func (h *hclogAdapter) SetLevel(hclog.Level) {}

func (h *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case h.IsTrace():
		return hclog.Trace
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	case h.IsError():
		return hclog.Error
	}
	return hclog.Off
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &stdWriter{h: h, opts: *opts}
}

// stdWriter turns standard-library log lines into records, reading a
// "[LEVEL]" prefix when asked to infer levels.
type stdWriter struct {
	h    *hclogAdapter
	opts hclog.StandardLoggerOptions
}

func (w *stdWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, "\r\n"))
	level := hclog.Info
	if w.opts.ForceLevel != hclog.NoLevel {
		level = w.opts.ForceLevel
	} else if w.opts.InferLevels {
		for prefix, l := range map[string]hclog.Level{
			"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info,
			"[WARN]": hclog.Warn, "[ERROR]": hclog.Error, "[ERR]": hclog.Error,
		} {
			if i := strings.Index(line, prefix); i >= 0 {
				level = l
				line = strings.TrimSpace(line[i+len(prefix):])
				break
			}
		}
	}
	w.h.Log(level, line)
	return len(p), nil
}
