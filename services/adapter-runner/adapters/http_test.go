package adapters_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
)

// received is one request the test service got.
type received struct {
	method, path, rawQuery, contentType, body string
	header                                    http.Header
}

// service is a local HTTP service that records requests and answers with
// the next of its replies (the last one repeats).
type service struct {
	mu       sync.Mutex
	requests []received
	replies  []reply
	srv      *httptest.Server
}

type reply struct {
	status int
	header map[string]string
	body   string
}

func newService(t *testing.T, replies ...reply) *service {
	t.Helper()
	s := &service{replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, received{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(b), r.Header.Clone()})
		rp := s.replies[min(len(s.requests), len(s.replies))-1]
		s.mu.Unlock()
		for k, v := range rp.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rp.status)
		_, _ = io.WriteString(w, rp.body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) got() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTheRunnerRegistersTheCatalogAdaptersByTheirCatalogNames(t *testing.T) {
	t.Parallel()
	s := serve(t, mustCatalog(t, t.TempDir()))
	if got, want := s.register.GetAdapters(), []string{"filesystem", "http"}; !slices.Equal(got, want) {
		t.Errorf("registered adapters = %v, want %v", got, want)
	}
}

func TestEachMethodBuildsItsRequestFromParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method              string
		params              map[string]any
		wantVerb, wantQuery string
		wantBody, wantCT    string
	}{
		{"fetch", map[string]any{"id": "A-17", "limit": 5.0, "tag": []any{"x", "y"}, "open": true},
			"GET", "id=A-17&limit=5&open=true&tag=x&tag=y", "", ""},
		{"create", map[string]any{"number": 7.0, "lines": []any{"a"}},
			"POST", "", `{"lines":["a"],"number":7}`, "application/json"},
		{"update", map[string]any{"paid": true},
			"PATCH", "", `{"paid":true}`, "application/json"},
		{"delete", map[string]any{"id": "A-17"},
			"DELETE", "id=A-17", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, reply{status: 200, body: `{"ok":true}`})
			s, _ := httpRunner(t, nil)
			resp := call(t, s, tt.method, "invoices", tt.params, map[string]any{"adapter": "http", "base_url": svc.srv.URL + "/api/"})
			if resp.GetError() != nil {
				t.Fatalf("error: %v", resp.GetError())
			}
			if got, want := asJSON(t, resp.GetData().AsInterface()), `{"data":{"ok":true},"status":200}`; got != want {
				t.Errorf("data = %s, want %s", got, want)
			}
			reqs := svc.got()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != tt.wantVerb || r.path != "/api/invoices" || r.rawQuery != tt.wantQuery || r.body != tt.wantBody || r.contentType != tt.wantCT {
				t.Errorf("request = %s %s ?%s body %q (%s), want %s /api/invoices ?%s body %q (%s)",
					r.method, r.path, r.rawQuery, r.body, r.contentType, tt.wantVerb, tt.wantQuery, tt.wantBody, tt.wantCT)
			}
			if r.header.Get("Accept") != "application/json" {
				t.Errorf("Accept = %q", r.header.Get("Accept"))
			}
		})
	}
}

func TestTheAnswerIsMappedToStatusAndData(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rep  reply
		want string
	}{
		{"an object", reply{status: 201, body: `{"id":"inv-9","total":12.5}`}, `{"data":{"id":"inv-9","total":12.5},"status":201}`},
		{"a list (the engine records the whole answer)", reply{status: 200, body: `[1,2]`}, `{"data":[1,2],"status":200}`},
		{"a scalar", reply{status: 200, body: `42`}, `{"data":42,"status":200}`},
		{"no content", reply{status: 204}, `{"data":{},"status":204}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, tt.rep)
			s, _ := httpRunner(t, nil)
			resp := call(t, s, "fetch", "x", nil, map[string]any{"base_url": svc.srv.URL})
			if resp.GetError() != nil {
				t.Fatalf("error: %v", resp.GetError())
			}
			if got := asJSON(t, resp.GetData().AsInterface()); got != tt.want {
				t.Errorf("data = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAuthComesFromTheEnvironmentVariableTheConfigNames(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"REALM_SECRET_LEDGER": "s3cret", "REALM_SECRET_BASIC": "me:pw", "HOME_TOKEN": "not-for-workflows"}
	tests := []struct {
		name       string
		auth       map[string]any
		headers    map[string]any
		wantHeader string
		wantValue  string
	}{
		{"bearer (the default type)", map[string]any{"token_env": "REALM_SECRET_LEDGER"}, nil, "Authorization", "Bearer s3cret"},
		{"basic", map[string]any{"type": "basic", "token_env": "REALM_SECRET_BASIC"}, nil, "Authorization", "Basic bWU6cHc="},
		{"header, default name", map[string]any{"type": "header", "token_env": "REALM_SECRET_LEDGER"}, nil, "X-Auth-Token", "s3cret"},
		{"header, named", map[string]any{"type": "header", "token_env": "REALM_SECRET_LEDGER", "header_name": "X-Api-Key"}, nil, "X-Api-Key", "s3cret"},
		{"static headers too", nil, map[string]any{"X-Tenant": "acme"}, "X-Tenant", "acme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, reply{status: 200, body: `{}`})
			s, _ := httpRunner(t, vars)
			cfg := map[string]any{"base_url": svc.srv.URL}
			if tt.auth != nil {
				cfg["auth"] = tt.auth
			}
			if tt.headers != nil {
				cfg["headers"] = tt.headers
			}
			if resp := call(t, s, "fetch", "me", nil, cfg); resp.GetError() != nil {
				t.Fatalf("error: %v", resp.GetError())
			}
			if got := svc.got()[0].header.Get(tt.wantHeader); got != tt.wantValue {
				t.Errorf("%s = %q, want %q", tt.wantHeader, got, tt.wantValue)
			}
		})
	}
}

func TestCredentialsThatAreNotTheRunnersToGiveAreRefusedBeforeTheRequest(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"HOME_TOKEN": "not-for-workflows"}
	tests := []struct {
		name     string
		auth     map[string]any
		wantCode errcode.Code
	}{
		{"a token written in the workflow file", map[string]any{"token": "literal"}, errcode.AdapterValidationFailed},
		{"a variable without the runner's prefix", map[string]any{"token_env": "HOME_TOKEN"}, errcode.AdapterValidationFailed},
		{"a variable that is not set", map[string]any{"token_env": "REALM_SECRET_MISSING"}, errcode.EngineAdapterFailed},
		{"a bad auth type", map[string]any{"type": "oauth", "token_env": "REALM_SECRET_X"}, errcode.AdapterValidationFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, reply{status: 200, body: `{}`})
			s, _ := httpRunner(t, vars)
			resp := call(t, s, "fetch", "me", nil, map[string]any{"base_url": svc.srv.URL, "auth": tt.auth})
			if got := resp.GetError().GetCode(); got != string(tt.wantCode) {
				t.Errorf("code = %q (%s), want %s", got, resp.GetError().GetMessage(), tt.wantCode)
			}
			if resp.GetError().GetRetryable() {
				t.Error("retryable, want not")
			}
			if n := len(svc.got()); n != 0 {
				t.Errorf("%d requests sent, want none", n)
			}
		})
	}
}

func TestErrorsAreClassifiedWithTheirCodeAndRetryableFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		rep        reply
		wantCode   errcode.Code
		wantCat    errcode.Category
		wantAction errcode.AgentAction
		retryable  bool
	}{
		{"401", reply{status: 401, body: `{"error":"bad token"}`}, errcode.ServiceAuthFailed, errcode.CategoryService, errcode.ActionStop, false},
		{"404", reply{status: 404}, errcode.ServiceNotFound, errcode.CategoryService, errcode.ActionProvideInput, false},
		{"400", reply{status: 400}, errcode.ServiceHTTP4xx, errcode.CategoryService, errcode.ActionReportToUser, false},
		{"403", reply{status: 403}, errcode.ServiceHTTP4xx, errcode.CategoryService, errcode.ActionReportToUser, false},
		{"422", reply{status: 422}, errcode.ServiceHTTP4xx, errcode.CategoryService, errcode.ActionReportToUser, false},
		{"500", reply{status: 500}, errcode.ServiceHTTP5xx, errcode.CategoryService, errcode.ActionWaitForHuman, true},
		{"503", reply{status: 503}, errcode.ServiceHTTP5xx, errcode.CategoryService, errcode.ActionWaitForHuman, true},
		{"a body that is not JSON", reply{status: 200, body: `<html>`}, errcode.ServiceResponseInvalid, errcode.CategoryService, errcode.ActionReportToUser, false},
		{"429 naming no wait", reply{status: 429}, errcode.ServiceRateLimited, errcode.CategoryService, errcode.ActionWaitAndProceed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, tt.rep)
			s, _ := httpRunner(t, nil)
			resp := call(t, s, "fetch", "orders", map[string]any{"email": "a@b.c"}, map[string]any{"base_url": svc.srv.URL})
			e := resp.GetError()
			if e == nil {
				t.Fatalf("no error; data %v", resp.GetData())
			}
			if e.GetCode() != string(tt.wantCode) || e.GetCategory() != string(tt.wantCat) ||
				e.GetAgentAction() != string(tt.wantAction) || e.GetRetryable() != tt.retryable {
				t.Errorf("error = %s/%s/%s retryable %v, want %s/%s/%s retryable %v (%s)",
					e.GetCode(), e.GetCategory(), e.GetAgentAction(), e.GetRetryable(),
					tt.wantCode, tt.wantCat, tt.wantAction, tt.retryable, e.GetMessage())
			}
			d := e.GetDetails().AsMap()
			if d["status"] != float64(tt.rep.status) || d["method"] != "GET" || d["url"] != svc.srv.URL+"/orders" {
				t.Errorf("details = %v", d)
			}
			if n := len(svc.got()); n != 1 {
				t.Errorf("%d requests, want 1 (no wait is known for the 429)", n)
			}
		})
	}
}

func TestAnUnreachableServiceIsARetryableNetworkError(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 200})
	base := svc.srv.URL
	svc.srv.Close() // nothing listens there now
	s, _ := httpRunner(t, nil)
	e := call(t, s, "fetch", "orders", nil, map[string]any{"base_url": base}).GetError()
	if e.GetCode() != string(errcode.NetworkUnreachable) || e.GetCategory() != string(errcode.CategoryNetwork) || !e.GetRetryable() {
		t.Errorf("error = %s/%s retryable %v, want NETWORK_UNREACHABLE/NETWORK retryable (%s)", e.GetCode(), e.GetCategory(), e.GetRetryable(), e.GetMessage())
	}
}

func TestARedirectToAnotherHostIsRefused(t *testing.T) {
	t.Parallel()
	other := newService(t, reply{status: 200, body: `{}`})
	svc := newService(t, reply{status: 302, header: map[string]string{"Location": other.srv.URL + "/steal"}})
	s, _ := httpRunner(t, map[string]string{"REALM_SECRET_T": "tok"})
	e := call(t, s, "fetch", "x", nil, map[string]any{"base_url": svc.srv.URL,
		"auth": map[string]any{"type": "header", "token_env": "REALM_SECRET_T"}}).GetError()
	if e.GetCode() != string(errcode.ServiceUnexpectedRedirect) {
		t.Errorf("code = %s (%s), want SERVICE_UNEXPECTED_REDIRECT", e.GetCode(), e.GetMessage())
	}
	if n := len(other.got()); n != 0 {
		t.Errorf("the other host got %d requests, want none", n)
	}
}

func TestBadCallsAreRefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 200, body: `{}`})
	tests := []struct {
		name, method, op string
		config           map[string]any
		wantCode         errcode.Code
	}{
		{"an unknown service_method", "upsert", "x", map[string]any{"base_url": svc.srv.URL}, errcode.AdapterOpUnsupported},
		{"no base_url", "fetch", "x", map[string]any{}, errcode.AdapterValidationFailed},
		{"a base_url that is not http", "fetch", "x", map[string]any{"base_url": "file:///etc"}, errcode.AdapterValidationFailed},
		{"an operation climbing out of base_url", "fetch", "../admin", map[string]any{"base_url": svc.srv.URL}, errcode.AdapterValidationFailed},
		{"a credential header in the workflow file", "fetch", "x", map[string]any{"base_url": svc.srv.URL, "headers": map[string]any{"authorization": "Bearer literal"}}, errcode.AdapterValidationFailed},
		{"a rate_limit with a wrong type", "fetch", "x", map[string]any{"base_url": svc.srv.URL, "rate_limit": map[string]any{"requests_per_second": "fast"}}, errcode.AdapterValidationFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := httpRunner(t, nil)
			e := call(t, s, tt.method, tt.op, nil, tt.config).GetError()
			if e.GetCode() != string(tt.wantCode) || e.GetRetryable() {
				t.Errorf("error = %s retryable %v (%s), want %s not retryable", e.GetCode(), e.GetRetryable(), e.GetMessage(), tt.wantCode)
			}
		})
	}
	if n := len(svc.got()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

func TestA429IsWaitedOutWithinTheServicesRetryBounds(t *testing.T) {
	t.Parallel()
	ok := reply{status: 200, body: `{"done":true}`}
	limited := func(retryAfter string) reply {
		r := reply{status: 429, body: `{"error":"slow down"}`}
		if retryAfter != "" {
			r.header = map[string]string{"Retry-After": retryAfter}
		}
		return r
	}
	tests := []struct {
		name       string
		replies    []reply
		rateLimit  map[string]any
		wantSleeps []time.Duration
		wantSent   int
		wantCode   errcode.Code // "" for success
		retryable  bool
		retryAfter any // details.retry_after; nil for absent
	}{
		{"Retry-After in seconds is waited, then the call is sent again",
			[]reply{limited("2"), ok}, nil, []time.Duration{2 * time.Second}, 2, "", false, nil},
		{"Retry-After as an HTTP date",
			[]reply{limited("Sun, 01 Mar 2026 12:00:05 GMT"), ok}, nil, []time.Duration{5 * time.Second}, 2, "", false, nil},
		{"no Retry-After: fallback_retry_seconds",
			[]reply{limited(""), ok}, map[string]any{"fallback_retry_seconds": 4.0}, []time.Duration{4 * time.Second}, 2, "", false, nil},
		{"min_retry_seconds raises a shorter wait",
			[]reply{limited("1"), ok}, map[string]any{"min_retry_seconds": 3.0}, []time.Duration{3 * time.Second}, 2, "", false, nil},
		{"longer than max_retry_seconds: fails at once, not retryable",
			[]reply{limited("120"), ok}, map[string]any{"max_retry_seconds": 60.0}, nil, 1, errcode.ServiceRateLimited, false, 120.0},
		{"a fallback past max_retry_seconds fails too",
			[]reply{limited(""), ok}, map[string]any{"fallback_retry_seconds": 90.0, "max_retry_seconds": 60.0}, nil, 1, errcode.ServiceRateLimited, false, 90.0},
		{"no wait known: fails at once, retryable",
			[]reply{limited("")}, nil, nil, 1, errcode.ServiceRateLimited, true, nil},
		{"still limited after the last wait: retryable, with retry_after",
			[]reply{limited("1")}, nil, []time.Duration{time.Second, time.Second, time.Second}, 4, errcode.ServiceRateLimited, true, 1.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, tt.replies...)
			s, clock := httpRunner(t, nil)
			cfg := map[string]any{"base_url": svc.srv.URL, "service": "ledger"}
			if tt.rateLimit != nil {
				cfg["rate_limit"] = tt.rateLimit
			}
			resp := call(t, s, "fetch", "rates", nil, cfg)
			if got := clock.recorded(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
			if n := len(svc.got()); n != tt.wantSent {
				t.Errorf("%d requests, want %d", n, tt.wantSent)
			}
			e := resp.GetError()
			if tt.wantCode == "" {
				if e != nil {
					t.Fatalf("error %s: %s", e.GetCode(), e.GetMessage())
				}
				if got := asJSON(t, resp.GetData().AsInterface()); got != `{"data":{"done":true},"status":200}` {
					t.Errorf("data = %s", got)
				}
				return
			}
			if e.GetCode() != string(tt.wantCode) || e.GetRetryable() != tt.retryable {
				t.Errorf("error = %s retryable %v, want %s retryable %v (%s)", e.GetCode(), e.GetRetryable(), tt.wantCode, tt.retryable, e.GetMessage())
			}
			if got := e.GetDetails().AsMap()["retry_after"]; got != tt.retryAfter {
				t.Errorf("details.retry_after = %v, want %v", got, tt.retryAfter)
			}
		})
	}
}

func TestA429WaitThatWouldPassTheStepsDeadlineIsNotWaited(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 429, header: map[string]string{"Retry-After": "3600"}})
	s, clock := httpRunner(t, nil)
	// call's context has a deadline well under an hour.
	e := call(t, s, "fetch", "x", nil, map[string]any{"base_url": svc.srv.URL}).GetError()
	if e.GetCode() != string(errcode.ServiceRateLimited) || !e.GetRetryable() || e.GetDetails().AsMap()["retry_after"] != 3600.0 {
		t.Errorf("error = %s retryable %v details %v", e.GetCode(), e.GetRetryable(), e.GetDetails().AsMap())
	}
	if got := clock.recorded(); len(got) != 0 {
		t.Errorf("slept %v, want no sleep", got)
	}
}

func TestTheRateLimitPacesCallsPerService(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 200, body: `{}`})
	s, clock := httpRunner(t, nil)
	limit := map[string]any{"requests_per_second": 2.0, "burst": 2.0}
	send := func(service string) {
		t.Helper()
		resp := call(t, s, "fetch", "x", nil, map[string]any{"base_url": svc.srv.URL, "service": service, "rate_limit": limit})
		if resp.GetError() != nil {
			t.Fatal(resp.GetError())
		}
	}
	for range 5 {
		send("ledger")
	}
	// The burst of 2 goes at once; each of the next 3 waits half a second
	// (the fake clock moves only by those waits).
	want := []time.Duration{500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}
	if got := clock.recorded(); !slices.Equal(got, want) {
		t.Errorf("sleeps = %v, want %v", got, want)
	}
	send("rates") // another service has its own, full bucket
	if got := clock.recorded(); len(got) != len(want) {
		t.Errorf("the other service's first call waited: sleeps %v", got)
	}
	if n := len(svc.got()); n != 6 {
		t.Errorf("%d requests, want 6", n)
	}
}

func TestA429PausesTheWholeService(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 429, header: map[string]string{"Retry-After": "5"}}, reply{status: 200, body: `{}`})
	s, clock := httpRunner(t, nil)
	strict := map[string]any{"base_url": svc.srv.URL, "service": "ledger", "rate_limit": map[string]any{"max_retry_seconds": 2.0}}
	if e := call(t, s, "fetch", "x", nil, strict).GetError(); e.GetCode() != string(errcode.ServiceRateLimited) || e.GetRetryable() {
		t.Fatalf("first call: %v", e)
	}
	// The service asked for 5s: a call that may wait only 2s is refused
	// without being sent...
	e := call(t, s, "fetch", "x", nil, strict).GetError()
	if e.GetCode() != string(errcode.ServiceRateLimited) || e.GetRetryable() || e.GetDetails().AsMap()["paused"] != true {
		t.Errorf("second call: %v", e)
	}
	// ...and one that may wait is sent once the 5s have passed.
	patient := map[string]any{"base_url": svc.srv.URL, "service": "ledger"}
	if e := call(t, s, "fetch", "x", nil, patient).GetError(); e != nil {
		t.Fatalf("third call: %v", e)
	}
	if got, want := clock.recorded(), []time.Duration{5 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("sleeps = %v, want %v", got, want)
	}
	if n := len(svc.got()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestTheStepsDeadlineCutsTheRequestOff(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	blocked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(blocked.Close)
	t.Cleanup(func() { close(release) })

	// Over gRPC the engine sees its own deadline pass.
	s, _ := httpRunner(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.client.CallAdapter(ctx, &realmv1.CallAdapterRequest{Adapter: "http", Method: "fetch", Operation: "slow",
		Config: mustStruct(t, map[string]any{"base_url": blocked.URL})})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("CallAdapter error = %v, want DeadlineExceeded", err)
	}

	// The adapter itself reports STEP_ABORTED, not a network error.
	h, err := adapters.NewHTTP("http", nil, loopbackAllowed())
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err = h.Call(ctx2, runner.AdapterCall{Method: "fetch", Operation: "slow", Config: map[string]any{"base_url": blocked.URL}})
	var werr *handler.WorkflowError
	if !errors.As(err, &werr) || werr.Code != errcode.StepAborted || werr.Retryable {
		t.Errorf("error = %v, want STEP_ABORTED, not retryable", err)
	}
}

func TestAManifestAdaptersCredentialsStayWithItsHost(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 200, body: `{}`})
	other := newService(t, reply{status: 200, body: `{}`})
	h, err := adapters.NewHTTP("ledger", map[string]any{
		"base_url": svc.srv.URL,
		"auth":     map[string]any{"type": "bearer", "token": "from-the-manifest"},
	}, loopbackAllowed())
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, map[string]runner.Adapter{"ledger": h})
	resp, err := s.client.CallAdapter(context.Background(), &realmv1.CallAdapterRequest{Adapter: "ledger", Method: "fetch", Operation: "x",
		Config: mustStruct(t, map[string]any{"base_url": other.srv.URL, "auth": map[string]any{"token_env": "REALM_SECRET_X"}})})
	if err != nil || resp.GetError() != nil {
		t.Fatalf("CallAdapter: %v %v", err, resp.GetError())
	}
	if n := len(other.got()); n != 0 {
		t.Errorf("the step's base_url got %d requests, want none", n)
	}
	if got := svc.got()[0].header.Get("Authorization"); got != "Bearer from-the-manifest" {
		t.Errorf("Authorization = %q", got)
	}
}
