package membership

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
)

// newMemberlistLogger bridges memberlist's log.Logger lines ("[WARN]
// memberlist: ...") to slog at their level. A message that could not be
// decrypted (a node with another secret) becomes a warning naming the
// secret's configuration key.
func newMemberlistLogger(lg *slog.Logger, secretName string) *log.Logger {
	return log.New(&logWriter{lg: lg.With("component", "memberlist"), secretName: secretName}, "", 0)
}

type logWriter struct {
	lg         *slog.Logger
	secretName string
}

func (w *logWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo, "[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError} {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			line, level = strings.TrimSpace(rest), l
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	if strings.Contains(line, "no installed keys could decrypt the message") {
		w.lg.Warn("gossip refused: a node with another "+w.secretName+" tried to talk to this one; every node of a cluster needs the same "+w.secretName, "detail", line)
		return len(p), nil
	}
	w.lg.Log(context.Background(), level, line)
	return len(p), nil
}
