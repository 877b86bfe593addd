// Package webhook is the webhook listener: an HTTP handler that serves the
// `trigger:` blocks of workflows, creates each accepted delivery's run
// through engine-svc and hands it to agent-svc (listen spec §5). `realm
// listen` and listen-svc both run it.
package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
)

// Level is a log line's importance.
type Level int

// The four levels (listen spec §2.1 --log-level).
const (
	LevelDebug Level = iota
	LevelInfo
	LevelWarn
	LevelError
)

// ParseLevel reads --log-level. An unknown value logs everything, as in
// the original.
func ParseLevel(s string) Level {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "info":
		return LevelInfo
	case "warn":
		return LevelWarn
	case "error":
		return LevelError
	}
	return LevelDebug
}

// KV is one detail of a log line; details keep the order they are given.
type KV struct {
	Key   string
	Value any
}

// Logger writes the listener's log lines: a message, then a space and a
// compact JSON object when there are details (spec §3.1). warn and error go
// to Err, debug and info to Out.
type Logger struct {
	mu       sync.Mutex
	out, err io.Writer
	min      Level
}

// NewLogger returns a Logger; nil writers discard.
func NewLogger(out, err io.Writer, min Level) *Logger {
	if out == nil {
		out = io.Discard
	}
	if err == nil {
		err = io.Discard
	}
	return &Logger{out: out, err: err, min: min}
}

// Debug writes one line at debug level; Info, Warn and Error likewise at theirs.
func (l *Logger) Debug(msg string, kv ...KV) { l.log(LevelDebug, msg, kv) }
func (l *Logger) Info(msg string, kv ...KV)  { l.log(LevelInfo, msg, kv) }
func (l *Logger) Warn(msg string, kv ...KV)  { l.log(LevelWarn, msg, kv) }
func (l *Logger) Error(msg string, kv ...KV) { l.log(LevelError, msg, kv) }

// Enabled reports whether lines at lv are written.
func (l *Logger) Enabled(lv Level) bool { return l != nil && lv >= l.min }

func (l *Logger) log(lv Level, msg string, kv []KV) {
	if !l.Enabled(lv) {
		return
	}
	line := msg
	if len(kv) > 0 {
		line += " " + compactObject(kv)
	}
	w := l.out
	if lv >= LevelWarn {
		w = l.err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(w, line+"\n")
}

// compactObject is JSON.stringify of an object with kv's keys in order.
func compactObject(kv []KV) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range kv {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonText(p.Key))
		b.WriteByte(':')
		b.WriteString(jsonText(p.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// jsonText is v as compact JSON, without HTML escaping (JavaScript's
// JSON.stringify does none).
func jsonText(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
