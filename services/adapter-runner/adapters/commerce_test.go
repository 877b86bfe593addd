package adapters_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
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

// fromManifest builds the adapter a realm.yaml entry `use: <use>` with
// config declares, its ${secret:…} values read from secrets (the env
// source), on a fake clock.
func fromManifest(t *testing.T, use string, config map[string]any, secrets map[string]string) (runner.Adapter, *fakeClock, error) {
	t.Helper()
	// JSON is YAML.
	doc, err := json.Marshal(map[string]any{
		"version": 1, "secrets": map[string]any{"sources": []any{"env"}},
		"adapters": map[string]any{"svc": map[string]any{"use": use, "config": config}},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	clock := newFakeClock()
	adps, err := adapters.LoadManifest(writeFile(t, dir, "realm.yaml", string(doc)),
		adapters.Options{Limiters: ratelimit.New(clock), LookupEnv: env(secrets)}, filepath.Join(dir, "none"))
	if err != nil {
		return nil, clock, err
	}
	return adps["svc"], clock, nil
}

// mustBuild is fromManifest that fails the test on a construction error.
func mustBuild(t *testing.T, ex apistub.Example) (runner.Adapter, *fakeClock) {
	t.Helper()
	a, clock, err := fromManifest(t, ex.Adapter, ex.Config, ex.Env)
	if err != nil {
		t.Fatal(err)
	}
	return a, clock
}

// invoke calls a with a generous deadline (it only keeps a broken test
// from hanging; the fake clock makes the 429 waits instant).
func invoke(t *testing.T, a runner.Adapter, method, op string, params map[string]any) (any, *handler.WorkflowError) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return invokeCtx(t, ctx, a, method, op, params, nil)
}

func invokeCtx(t *testing.T, ctx context.Context, a runner.Adapter, method, op string, params, config map[string]any) (any, *handler.WorkflowError) {
	t.Helper()
	if config == nil {
		config = map[string]any{"adapter": "svc", "trust": "engine_delivered", "service": "svc"}
	}
	out, err := a.Call(ctx, runner.AdapterCall{Method: method, Operation: op, Params: params, Config: config, RunID: "run-1", Step: "step"})
	if err == nil {
		return out, nil
	}
	we, ok := err.(*handler.WorkflowError)
	if !ok {
		t.Fatalf("error %T %v is not a WorkflowError", err, err)
	}
	return out, we
}

// dataOf is a reply's data as JSON.
func dataOf(t *testing.T, out any) string {
	t.Helper()
	m, ok := out.(map[string]any)
	if !ok {
		t.Fatalf("reply %T is not {status, data}", out)
	}
	return asJSON(t, m["data"])
}

// wantErr is an expected §13.4 error; retryAfter nil for absent.
type wantErr struct {
	code       errcode.Code
	action     errcode.AgentAction
	retryable  bool
	retryAfter any
}

func (w wantErr) check(t *testing.T, e *handler.WorkflowError) {
	t.Helper()
	if e == nil {
		t.Fatalf("no error, want %s", w.code)
	}
	if e.Code != w.code || e.AgentAction != w.action || e.Retryable != w.retryable {
		t.Errorf("error = %s/%s retryable %v, want %s/%s retryable %v (%s)", e.Code, e.AgentAction, e.Retryable, w.code, w.action, w.retryable, e.Message)
	}
	if got := e.Details["retry_after"]; got != w.retryAfter {
		t.Errorf("details.retry_after = %v, want %v", got, w.retryAfter)
	}
}

// commerceCase is one adapter of the family with a call that succeeds
// against its stub.
type commerceCase struct {
	name string
	stub interface {
		Fail(apistub.Failure)
		Close()
		Requests() []apistub.Request
	}
	ex       apistub.Example
	notFound wantErr
	// noRetryAfter is the 429 without Retry-After: the adapter's default
	// wait (waited three times) or none.
	noRetryAfterSleeps []time.Duration
	noRetryAfter       wantErr
}

func commerceCases(t *testing.T) []commerceCase {
	g, s, p := apistub.NewGorgias(t), apistub.NewShopify(t), apistub.NewParcelPanel(t)
	minute := []time.Duration{time.Minute, time.Minute, time.Minute}
	return []commerceCase{
		{"gorgias", g, apistub.GorgiasExample(g),
			wantErr{errcode.ServiceHTTP4xx, errcode.ActionStop, false, nil},
			minute, wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, 60.0}},
		{"shopify", s, apistub.ShopifyExample(s),
			wantErr{errcode.ServiceNotFound, errcode.ActionProvideInput, false, nil},
			nil, wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, nil}},
		{"parcelpanel", p, apistub.ParcelPanelExample(p),
			wantErr{errcode.ServiceNotFound, errcode.ActionProvideInput, false, nil},
			minute, wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, 60.0}},
	}
}

func TestCommerceAdaptersAnswerTheirExamples(t *testing.T) {
	t.Parallel()
	for _, c := range commerceCases(t) {
		t.Run(c.name, func(t *testing.T) {
			a, _ := mustBuild(t, c.ex)
			out, e := invoke(t, a, c.ex.Method, c.ex.Operation, c.ex.Params)
			if e != nil {
				t.Fatal(e)
			}
			if got, want := dataOf(t, out), asJSON(t, c.ex.Output); got != want {
				t.Errorf("data = %s\nwant %s", got, want)
			}
		})
	}
}

// Every row of spec §13.4, for each adapter of the family.
func TestCommerceAdaptersClassifyFailuresPerSpec(t *testing.T) {
	t.Parallel()
	fiveSecs := []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}
	rows := []struct {
		name    string
		failure *apistub.Failure // nil: the stub answers normally
		close   bool             // the stub's port is closed
		method  string           // "" for the example's
		op      string           // "" for the example's
		config  map[string]any   // the call's config; nil for the engine's usual
		// want is the error (code "" for success); nil: the adapter's own
		// (notFound, noRetryAfter).
		want       *wantErr
		sleeps     []time.Duration
		adapterRow string
	}{
		{name: "401 is an auth failure", failure: &apistub.Failure{Status: 401},
			want: &wantErr{errcode.ServiceAuthFailed, errcode.ActionStop, false, nil}},
		{name: "404 per the adapter", failure: &apistub.Failure{Status: 404}, adapterRow: "notFound"},
		{name: "403 is another 4xx", failure: &apistub.Failure{Status: 403},
			want: &wantErr{errcode.ServiceHTTP4xx, errcode.ActionStop, false, nil}},
		{name: "422 is another 4xx", failure: &apistub.Failure{Status: 422},
			want: &wantErr{errcode.ServiceHTTP4xx, errcode.ActionStop, false, nil}},
		{name: "a 429 with Retry-After is waited out, then the call succeeds", failure: &apistub.Failure{Status: 429, RetryAfter: "5", Times: 1},
			want: &wantErr{}, sleeps: fiveSecs[:1]},
		{name: "a 429 that persists carries Retry-After as retry_after", failure: &apistub.Failure{Status: 429, RetryAfter: "5"},
			want: &wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, 5.0}, sleeps: fiveSecs},
		{name: "a 429 without Retry-After uses the adapter's default", failure: &apistub.Failure{Status: 429}, adapterRow: "noRetryAfter"},
		{name: "500 is a 5xx for the user", failure: &apistub.Failure{Status: 500},
			want: &wantErr{errcode.ServiceHTTP5xx, errcode.ActionReportToUser, true, nil}},
		{name: "503 too", failure: &apistub.Failure{Status: 503},
			want: &wantErr{errcode.ServiceHTTP5xx, errcode.ActionReportToUser, true, nil}},
		{name: "a malformed body", failure: &apistub.Failure{Malformed: true},
			want: &wantErr{errcode.ServiceResponseInvalid, errcode.ActionReportToUser, false, nil}},
		{name: "a closed port is the network", close: true,
			want: &wantErr{errcode.NetworkUnreachable, errcode.ActionWaitForHuman, true, nil}},
		{name: "the step's time limit passing aborts", failure: &apistub.Failure{Hang: true},
			want: &wantErr{errcode.StepAborted, errcode.ActionReportToUser, false, nil}},
		{name: "an unknown operation", op: "explode",
			want: &wantErr{errcode.AdapterOpUnsupported, errcode.ActionReportToUser, false, nil}},
		{name: "a service_method the adapter lacks", method: "delete",
			want: &wantErr{errcode.AdapterOpUnsupported, errcode.ActionReportToUser, false, nil}},
		{name: "a step config key is refused", config: map[string]any{"adapter": "svc", "base_url": "http://elsewhere"},
			want: &wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range commerceCases(t) {
				t.Run(c.name, func(t *testing.T) {
					a, clock := mustBuild(t, c.ex)
					if row.failure != nil {
						c.stub.Fail(*row.failure)
					}
					if row.close {
						c.stub.Close()
					}
					method, op := cmp(row.method, c.ex.Method), cmp(row.op, c.ex.Operation)
					limit := 10 * time.Minute
					if row.failure != nil && row.failure.Hang {
						limit = 100 * time.Millisecond
					}
					ctx, cancel := context.WithTimeout(context.Background(), limit)
					defer cancel()
					out, e := invokeCtx(t, ctx, a, method, op, c.ex.Params, row.config)
					want, sleeps := row.want, row.sleeps
					switch row.adapterRow {
					case "notFound":
						want = &c.notFound
					case "noRetryAfter":
						want, sleeps = &c.noRetryAfter, c.noRetryAfterSleeps
					}
					if got := clock.recorded(); !slices.Equal(got, sleeps) {
						t.Errorf("sleeps = %v, want %v", got, sleeps)
					}
					if want.code == "" {
						if e != nil {
							t.Fatal(e)
						}
						if got := dataOf(t, out); got != asJSON(t, c.ex.Output) {
							t.Errorf("data = %s", got)
						}
						return
					}
					want.check(t, e)
					if e != nil && strings.Contains(e.Message+asJSON(t, e.Details), "${secret") {
						t.Errorf("error shows an unresolved secret: %s", e.Message)
					}
				})
			}
		})
	}
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// The adapters built from a manifest answer through the runner's gRPC
// service as the engine calls them.
func TestCommerceAdaptersServeThroughTheRunner(t *testing.T) {
	t.Parallel()
	built := map[string]runner.Adapter{}
	cases := commerceCases(t)
	for _, c := range cases {
		built[c.name], _ = mustBuild(t, c.ex)
	}
	s := serve(t, built)
	send := func(t *testing.T, c commerceCase) *realmv1.CallAdapterResponse {
		t.Helper()
		return callNamed(t, s, c.name, c.ex.Method, c.ex.Operation, c.ex.Params)
	}
	// Sequential: the second call switches the stub to fail.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := send(t, c)
			if resp.GetError() != nil {
				t.Fatalf("error %s: %s", resp.GetError().GetCode(), resp.GetError().GetMessage())
			}
			got := resp.GetData().AsInterface().(map[string]any)
			if asJSON(t, got["data"]) != asJSON(t, c.ex.Output) || got["status"] != 200.0 {
				t.Errorf("answer = %s", asJSON(t, got))
			}
			c.stub.Fail(apistub.Failure{Status: 404})
			e := send(t, c).GetError()
			if e.GetCode() != string(c.notFound.code) || e.GetAgentAction() != string(c.notFound.action) || e.GetRetryable() {
				t.Errorf("404 = %s/%s retryable %v, want %s/%s", e.GetCode(), e.GetAgentAction(), e.GetRetryable(), c.notFound.code, c.notFound.action)
			}
		})
	}
}
