package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestLevelFromTheEnvironmentFiltersLines(t *testing.T) {
	cases := []struct {
		env        string
		wantDebug  bool
		wantInfo   bool
		wantWarned bool
	}{
		{env: "", wantInfo: true},
		{env: "debug", wantDebug: true, wantInfo: true},
		{env: "WARN"},
		{env: "loud", wantInfo: true, wantWarned: true},
	}
	for _, c := range cases {
		t.Run("env="+c.env, func(t *testing.T) {
			var buf bytes.Buffer
			log := New(&buf, func(k string) string {
				if k == LevelEnv {
					return c.env
				}
				return ""
			})
			log.Debug("d")
			log.Info("i")
			msgs := map[string]bool{}
			for raw := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
				var l struct{ Msg string }
				if raw == "" {
					continue
				}
				if err := json.Unmarshal([]byte(raw), &l); err != nil {
					t.Fatalf("not JSON: %q", raw)
				}
				msgs[l.Msg] = true
			}
			if msgs["d"] != c.wantDebug || msgs["i"] != c.wantInfo || msgs["unknown log level; logging at info"] != c.wantWarned {
				t.Errorf("lines = %v", msgs)
			}
		})
	}
}

func TestLineLoggedWithASpanCarriesItsIDs(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, func(string) string { return "" })
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	log.With("svc", "engine").InfoContext(ctx, "with span")
	log.InfoContext(context.Background(), "without span")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var with, without map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &with) != nil || json.Unmarshal([]byte(lines[1]), &without) != nil {
		t.Fatalf("lines: %q", lines)
	}
	if with["trace_id"] != tid.String() || with["span_id"] != sid.String() || with["svc"] != "engine" {
		t.Errorf("line with a span = %v", with)
	}
	if _, ok := without["trace_id"]; ok {
		t.Errorf("line without a span = %v", without)
	}
}
