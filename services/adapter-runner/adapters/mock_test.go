package adapters_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

func mockEntry(t *testing.T, responses map[string]any) entry {
	t.Helper()
	return buildEntry(t, apistub.Example{Adapter: "mock", Config: map[string]any{"responses": responses}})
}

func TestTheMockAnswersEachOperationWithItsConfiguredResponse(t *testing.T) {
	t.Parallel()
	m := mockEntry(t, map[string]any{
		"get_order":   map[string]any{"status": 200, "data": map[string]any{"total": 40}},
		"post_note":   map[string]any{"status": 201, "data": map[string]any{"id": "n-1"}},
		"count":       map[string]any{"data": 42},
		"close_order": map[string]any{"status": 204},
	})
	tests := []struct {
		method, op string
		want       map[string]any
	}{
		{"fetch", "get_order", map[string]any{"status": 200.0, "data": map[string]any{"total": 40.0}}},
		{"create", "post_note", map[string]any{"status": 201.0, "data": map[string]any{"id": "n-1"}}},
		// status defaults to 200; data need not be an object (the engine
		// then records the whole answer, spec §13.1).
		{"fetch", "count", map[string]any{"status": 200.0, "data": 42.0}},
		{"update", "close_order", map[string]any{"status": 204.0, "data": nil}},
		// Every method reads the same table, as a fixture's mocks do.
		{"delete", "get_order", map[string]any{"status": 200.0, "data": map[string]any{"total": 40.0}}},
	}
	for _, tt := range tests {
		got, err := m.do(t, tt.method, tt.op, map[string]any{"ignored": true})
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.op, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %s = %v, want %v", tt.method, tt.op, got, tt.want)
		}
	}
}

func TestTheMockFailsAsItsResponseSays(t *testing.T) {
	t.Parallel()
	m := mockEntry(t, map[string]any{
		"unauthorized": map[string]any{"status": 401},
		"missing":      map[string]any{"status": 404, "data": map[string]any{"error": "no such order"}},
		"refused":      map[string]any{"status": 422},
		"limited":      map[string]any{"status": 429},
		"down":         map[string]any{"status": 503},
		"offline":      map[string]any{"error": map[string]any{"code": "NETWORK_UNREACHABLE", "message": "connect: connection refused"}},
	})
	tests := []struct {
		op     string
		want   wantErr
		wantIn string
	}{
		{"unauthorized", wantErr{code: errcode.ServiceAuthFailed, action: errcode.ActionStop}, "answered 401"},
		{"missing", wantErr{code: errcode.ServiceNotFound, action: errcode.ActionProvideInput}, "answered 404"},
		{"refused", wantErr{code: errcode.ServiceHTTP4xx, action: errcode.ActionStop}, "answered 422"},
		{"limited", wantErr{code: errcode.ServiceRateLimited, action: errcode.ActionWaitAndProceed, retryable: true}, "answered 429"},
		{"down", wantErr{code: errcode.ServiceHTTP5xx, action: errcode.ActionWaitForHuman, retryable: true}, "answered 503"},
		{"offline", wantErr{code: errcode.NetworkUnreachable, action: errcode.ActionWaitForHuman, retryable: true}, "connection refused"},
		{"not_configured", wantErr{code: errcode.EngineAdapterFailed, action: errcode.ActionReportToUser},
			"MockServiceRecorder: no response configured for operation 'not_configured'"},
	}
	for _, tt := range tests {
		_, err := m.do(t, "fetch", tt.op, nil)
		if d := sameErr(err, tt.want); d != "" {
			t.Errorf("%s: %s", tt.op, d)
		} else if !strings.Contains(err.Error(), tt.wantIn) {
			t.Errorf("%s: message %q does not say %q", tt.op, err.Error(), tt.wantIn)
		}
	}
	// A configured error is raised afresh each time: one call's changes
	// do not reach the next.
	_, first := m.do(t, "fetch", "offline", nil)
	asWorkflowErr(t, first).Message = "changed"
	if _, again := m.do(t, "fetch", "offline", nil); !strings.Contains(again.Error(), "connection refused") {
		t.Errorf("second error = %v", again)
	}
}

func TestTheMockWaitsItsDelayOnTheRunnersClock(t *testing.T) {
	t.Parallel()
	m := mockEntry(t, map[string]any{"slow": map[string]any{"delay_ms": 1500, "data": map[string]any{"ok": true}}})
	if _, err := m.do(t, "fetch", "slow", nil); err != nil {
		t.Fatal(err)
	}
	if got := m.clock.recorded(); !slices.Equal(got, []time.Duration{1500 * time.Millisecond}) {
		t.Errorf("waits = %v, want [1.5s]", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the step's time limit has passed
	_, err := m.adapter.Call(ctx, runner.AdapterCall{Method: "fetch", Operation: "slow", Config: map[string]any{}})
	if d := sameErr(err, wantErr{code: errcode.StepAborted, action: errcode.ActionReportToUser}); d != "" {
		t.Error(d)
	}
}

func TestTheMocksEntryIsCheckedWhenTheManifestIsLoaded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		config map[string]any
		wantIn string
	}{
		{"a key other than responses", map[string]any{"responses": map[string]any{}, "latency": 5}, "unknown key 'latency'"},
		{"a response that is not an object", map[string]any{"responses": map[string]any{"a": 200}}, "config.responses.a must be an object"},
		{"a key a response does not have", map[string]any{"responses": map[string]any{"a": map[string]any{"body": "x"}}}, "config.responses.a: config: unknown key 'body'"},
		{"a status that is not HTTP's", map[string]any{"responses": map[string]any{"a": map[string]any{"status": 42}}}, "an HTTP status"},
		{"a delay over a minute", map[string]any{"responses": map[string]any{"a": map[string]any{"delay_ms": 600000}}}, "delay_ms"},
		{"an error code Realm lacks", map[string]any{"responses": map[string]any{"a": map[string]any{"error": map[string]any{"code": "OOPS", "message": "x"}}}}, "a Realm error code"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := tryEntry(t, apistub.Example{Adapter: "mock", Config: tt.config}); err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("error = %v, want one saying %q", err, tt.wantIn)
			}
		})
	}
}

func TestAMockWithoutConfigAnswersNothing(t *testing.T) {
	t.Parallel()
	m := buildEntry(t, apistub.Example{Adapter: "mock"})
	_, err := m.do(t, "fetch", "anything", nil)
	if d := sameErr(err, wantErr{code: errcode.EngineAdapterFailed, action: errcode.ActionReportToUser}); d != "" {
		t.Error(d)
	}
}
