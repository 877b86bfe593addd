package adapters_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
	"github.com/realm-go/realm/services/adapter-runner/ratelimit"
)

// entry is a catalog adapter built as a deployment builds it: a realm.yaml
// entry `use: <ex.Adapter>` whose config names its secrets (${secret:…}),
// resolved from the environment; the runner's clock is fake.
type entry struct {
	adapter runner.Adapter
	clock   *fakeClock
}

func buildEntry(t *testing.T, ex apistub.Example) entry {
	t.Helper()
	a, clock, err := tryEntry(t, ex)
	if err != nil {
		t.Fatal(err)
	}
	return entry{a, clock}
}

func tryEntry(t *testing.T, ex apistub.Example) (runner.Adapter, *fakeClock, error) {
	t.Helper()
	doc := map[string]any{"version": 1, "secrets": map[string]any{"sources": []any{"env"}},
		"adapters": map[string]any{"svc": map[string]any{"use": ex.Adapter, "config": ex.Config}}}
	raw, err := json.Marshal(doc) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clock := newFakeClock()
	adps, err := adapters.LoadManifest(writeFile(t, dir, "realm.yaml", string(raw)),
		adapters.Options{LookupEnv: env(ex.Env), Limiters: ratelimit.New(clock)}, "")
	if err != nil {
		return nil, nil, err
	}
	return adps["svc"], clock, nil
}

// do calls one operation and returns the answer as the engine reads it
// (JSON).
func (e entry) do(t *testing.T, method, op string, params map[string]any) (map[string]any, error) {
	t.Helper()
	return e.doConfig(t, method, op, params, map[string]any{"adapter": "svc", "service": "svc"})
}

func (e entry) doConfig(t *testing.T, method, op string, params, config map[string]any) (map[string]any, error) {
	t.Helper()
	// Longer than Airtable's 30 s wait (on the fake clock): the deadline
	// only keeps a broken test from hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := e.adapter.Call(ctx, runner.AdapterCall{Method: method, Operation: op, Params: params, Config: config, RunID: "run-1", Step: "step"})
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

// sameErr is "" when err is a WorkflowError classified as want, else
// what differs.
func sameErr(err error, want wantErr) string {
	var we *handler.WorkflowError
	if !errors.As(err, &we) {
		return fmt.Sprintf("error %v is not a WorkflowError", err)
	}
	var retryAfter any
	if we.Details != nil {
		retryAfter = we.Details["retry_after"]
	}
	if we.Code != want.code || we.AgentAction != want.action || we.Retryable != want.retryable || fmt.Sprint(retryAfter) != fmt.Sprint(want.retryAfter) {
		return fmt.Sprintf("error = %s/%s retryable %v retry_after %v, want %s/%s retryable %v retry_after %v (%s)",
			we.Code, we.AgentAction, we.Retryable, retryAfter, want.code, want.action, want.retryable, want.retryAfter, we.Message)
	}
	return ""
}

// asJSONMap is v as the engine reads it.
func asJSONMap(t *testing.T, v any) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(asJSON(t, v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// bodyOf is a recorded request's JSON body.
func bodyOf(t *testing.T, r apistub.Request) any {
	t.Helper()
	if r.Body == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(r.Body), &v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	return v
}

// callNamed sends one CallAdapter for the adapter registered as name, as
// the engine does.
func callNamed(t *testing.T, s *served, name, method, op string, params map[string]any) *realmv1.CallAdapterResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	resp, err := s.client.CallAdapter(ctx, &realmv1.CallAdapterRequest{
		Adapter: name, Method: method, Operation: op, Params: mustStruct(t, params),
		Config: mustStruct(t, map[string]any{"adapter": name, "service": name}), RunId: "run-1", Step: "step",
	})
	if err != nil {
		t.Fatalf("CallAdapter: %v", err)
	}
	return resp
}

func asWorkflowErr(t *testing.T, err error) *handler.WorkflowError {
	t.Helper()
	var we *handler.WorkflowError
	if !errors.As(err, &we) {
		t.Fatalf("error %v is not a WorkflowError", err)
	}
	return we
}

func TestTheStepsTimeLimitAbortsAirtableAndNotionCalls(t *testing.T) {
	t.Parallel()
	_, at, ids := airtableSetup(t)
	_, n, w := notionSetup(t)
	for name, c := range map[string]struct {
		e      entry
		op     string
		params map[string]any
	}{
		"airtable": {at, "get_record", map[string]any{"table": "Tickets", "record_id": ids[0]}},
		"notion":   {n, "get_page", map[string]any{"page_id": w.page}},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the attempt's time limit has passed
		_, err := c.e.adapter.Call(ctx, runner.AdapterCall{Method: "fetch", Operation: c.op, Params: c.params, Config: map[string]any{}})
		if d := sameErr(err, wantErr{code: errcode.StepAborted, action: errcode.ActionReportToUser}); d != "" {
			t.Errorf("%s: %s", name, d)
		}
	}
}

// refusedUnsent checks a call refused for its params before any request:
// ADAPTER_VALIDATION_FAILED, its message saying wantIn, sent requests none.
func refusedUnsent(t *testing.T, err error, wantIn string, sent int) {
	t.Helper()
	if d := sameErr(err, wantErr{code: errcode.AdapterValidationFailed, action: errcode.ActionProvideInput}); d != "" {
		t.Fatal(d)
	}
	if !strings.Contains(err.Error(), wantIn) {
		t.Errorf("message %q does not say %q", err.Error(), wantIn)
	}
	if sent != 0 {
		t.Errorf("%d requests sent, want none", sent)
	}
}
