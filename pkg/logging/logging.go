// Package logging builds the JSON logger the services write in service
// mode, at the level REALM_LOG_LEVEL names, with the trace and span ids of
// the call on every line logged with its context.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// LevelEnv names the variable that sets the level: debug, info (the
// default), warn or error.
const LevelEnv = "REALM_LOG_LEVEL"

// ParseLevel reads a level name; empty is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("%s=%q: want debug, info, warn or error", LevelEnv, s)
}

// New returns a JSON logger on w at the level getenv(LevelEnv) names. An
// unknown name logs at info and says so once, rather than stopping the
// service.
func New(w io.Writer, getenv func(string) string) *slog.Logger {
	level, err := ParseLevel(getenv(LevelEnv))
	log := slog.New(traceHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
	if err != nil {
		log.Warn("unknown log level; logging at info", "err", err)
	}
	return log
}

// traceHandler adds trace_id and span_id to a line logged with a context
// that carries a span (Logger.InfoContext and the like), so a log line and
// its trace can be joined.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
