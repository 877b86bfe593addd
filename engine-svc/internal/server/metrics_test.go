package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
)

// scrape reads the /metrics page the way Prometheus does and returns its
// sample lines for metrics whose name starts with prefix.
func scrape(t *testing.T, addr, prefix string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			lines[l] = true
		}
	}
	return lines
}

// The engine counts at the write path: a run driven to completion shows as
// one start, one completed end, its writes and its evidence by kind, and the
// gRPC interceptor counts the calls that carried it.
func TestMetricsCountARunDrivenToCompletion(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			reg := metrics.NewRegistry()
			e := setup(t, b, withMetrics(reg))
			sctx, cancel := context.WithCancel(context.Background())
			srv, err := metrics.Serve(sctx, nil, "127.0.0.1:0", reg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cancel()
				if err := srv.Wait(); err != nil {
					t.Errorf("metrics server stopped with %v", err)
				}
			})

			e.register(t, readFile(t, "testdata/triage.yaml"))
			run := start(t, e, "triage", map[string]any{"ticket": 7}).GetRunId()
			step(t, e, run, "classify", map[string]any{"category": "nope", "confidence": 0.9}) // counted refusal: a write, no evidence
			step(t, e, run, "classify", map[string]any{"category": "billing", "confidence": 0.9})
			step(t, e, run, "draft", map[string]any{"reply": "Refunded."})
			step(t, e, run, "draft", map[string]any{"reply": "again"}) // terminal: no write
			s := state(t, e, run)

			got := scrape(t, srv.Addr(), "")
			want := []string{
				"realm_runs_started_total 1",
				`realm_runs_ended_total{phase="completed"} 1`,
				`realm_run_writes_total{result="ok"} 4`,
				"realm_run_write_seconds_count 4",
				`realm_step_records_total{kind="agent",status="success"} 2`,
				`realm_step_records_total{kind="auto",status="success"} 1`,
				`realm_step_records_total{kind="guard",status="success"} 1`,
				`grpc_server_handled_total{grpc_code="OK",grpc_method="ExecuteStep",grpc_service="realm.v1.EngineService",grpc_type="unary"} 4`,
				`grpc_server_handled_total{grpc_code="OK",grpc_method="StartRun",grpc_service="realm.v1.EngineService",grpc_type="unary"} 1`,
			}
			for _, w := range want {
				if !got[w] {
					t.Errorf("missing sample %q", w)
				}
			}
			redisOK := false
			for l := range got {
				redisOK = redisOK || strings.HasPrefix(l, "realm_redis_round_trip_seconds_count{") && strings.Contains(l, `result="ok"`)
			}
			if !redisOK {
				t.Errorf("no Redis round trip was timed")
			}
			// Every evidence entry is counted once, whatever its kind.
			var records int64
			for l := range got {
				if strings.HasPrefix(l, "realm_step_records_total{") {
					var n int64
					if _, err := fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &n); err != nil {
						t.Fatalf("sample %q: %v", l, err)
					}
					records += n
				}
			}
			if records != int64(s.GetEvidenceCount()) {
				t.Errorf("step_records_total sums to %d, run has %d evidence entries", records, s.GetEvidenceCount())
			}
			if t.Failed() {
				for l := range got {
					if strings.HasPrefix(l, "realm_") {
						t.Log(l)
					}
				}
			}
		})
	}
}

// A gate that opens and then expires into an abort shows as one opened
// gate, one expiry under its on_expiry and one aborted run.
func TestMetricsCountGatesAndTheirExpiry(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	e := setup(t, "miniredis", withMetrics(reg))
	sctx, cancel := context.WithCancel(context.Background())
	srv, err := metrics.Serve(sctx, nil, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Wait() })

	run, _ := openExpiring(t, e, "expiring_abort", 12*time.Second)
	if r := advance(t, e, run); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED {
		t.Fatalf("advance = %v", r)
	}
	got := scrape(t, srv.Addr(), "realm_")
	for _, w := range []string{
		"realm_gates_opened_total 1",
		`realm_gate_expiries_total{on_expiry="abort"} 1`,
		`realm_runs_ended_total{phase="aborted"} 1`,
	} {
		if !got[w] {
			t.Errorf("missing sample %q in %v", w, got)
		}
	}
}

// The engine's calls to runners are counted as gRPC client calls.
func TestMetricsCountCallsToRunners(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	e := setup(t, "miniredis", withMetrics(reg))
	startRunner(t, e, map[string]handlerFunc{
		"data": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"ok": true})}, nil
		},
	})
	sctx, cancel := context.WithCancel(context.Background())
	srv, err := metrics.Serve(sctx, nil, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Wait() })
	e.register(t, oneStep("data", ""))
	if r := start(t, e, "one_data", nil); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("start = %v", r)
	}
	got := scrape(t, srv.Addr(), "grpc_client_handled_total")
	w := `grpc_client_handled_total{grpc_code="OK",grpc_method="ExecuteHandler",grpc_service="realm.v1.RunnerService",grpc_type="unary"} 1`
	if !got[w] {
		t.Errorf("missing %q in %v", w, got)
	}
}

// The engine's JSON log tells a run's story by run_id: a Debug line per
// write with its version and recorded steps, and one Info line when it ends.
func TestLogFollowsARunByItsID(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	e := setup(t, "miniredis", withLog(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	e.register(t, readFile(t, "testdata/triage.yaml"))
	run := start(t, e, "triage", map[string]any{"ticket": 3}).GetRunId()
	step(t, e, run, "classify", map[string]any{"category": "bug", "confidence": 0.5})
	step(t, e, run, "draft", map[string]any{"reply": "Fixed."})

	type line struct {
		Level   string   `json:"level"`
		Msg     string   `json:"msg"`
		RunID   string   `json:"run_id"`
		Version int64    `json:"run_version"`
		Phase   string   `json:"phase"`
		Steps   []string `json:"steps"`
	}
	var written []line
	var ended []line
	for raw := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("not a JSON line: %q", raw)
		}
		if l.RunID != run {
			continue
		}
		switch l.Msg {
		case "run written":
			written = append(written, l)
		case "run ended":
			ended = append(ended, l)
		}
	}
	if len(written) != 3 || written[0].Version != 0 || written[2].Version != 2 ||
		strings.Join(written[1].Steps, ",") != "classify=success,route=success,not_spam=success" {
		t.Errorf("run written lines = %+v", written)
	}
	if len(ended) != 1 || ended[0].Level != "INFO" || ended[0].Phase != "completed" || strings.Join(ended[0].Steps, ",") != "draft=success" {
		t.Errorf("run ended lines = %+v", ended)
	}
}

// syncBuffer is a bytes.Buffer safe for the engine's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
