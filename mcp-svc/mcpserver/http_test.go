package mcpserver

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const (
	okAccept  = "application/json, text/event-stream"
	toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
)

// syncBuffer is a log the server writes from its own goroutines.
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

type req struct {
	method, body string
	header       map[string]string
	chunked      bool // no Content-Length: the limit must hold while reading
}

func do(t *testing.T, url string, r req) (int, http.Header, string) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	var body io.Reader = strings.NewReader(r.body)
	if r.chunked {
		body = io.MultiReader(strings.NewReader(r.body)) // hides the length
	}
	hr, err := http.NewRequestWithContext(ctxT(t), r.method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func batchOf(n int) string {
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

// TestHTTPRepliesFollowTheSpecsTable sends each kind of request of
// mcp-and-gates §1.2 over real HTTP and checks status, body and headers.
func TestHTTPRepliesFollowTheSpecsTable(t *testing.T) {
	t.Parallel()
	s := newTestServer(&fakeEngine{})
	srv := httptest.NewServer(s.HTTPHandler(HTTPOptions{Token: "s3cret", ErrorLog: io.Discard}))
	t.Cleanup(srv.Close)
	auth := map[string]string{"Authorization": "Bearer s3cret", "Accept": okAccept}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range auth {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	padded := toolsList + strings.Repeat(" ", MaxBodyBytes-len(toolsList))
	cases := []struct {
		name     string
		r        req
		code     int
		body     string // exact, or "" to check contains
		contains string
		authHdr  bool
	}{
		{"no token", req{body: toolsList, header: map[string]string{"Accept": okAccept}}, 401, `{"error":"Unauthorized"}`, "", true},
		{"wrong token", req{body: toolsList, header: with(map[string]string{"Authorization": "Bearer nope"})}, 401, `{"error":"Unauthorized"}`, "", true},
		{"not a bearer token", req{body: toolsList, header: with(map[string]string{"Authorization": "Basic s3cret"})}, 401, `{"error":"Unauthorized"}`, "", true},
		{"token checked before everything else", req{body: "{oops", header: map[string]string{"Accept": "text/html"}}, 401, `{"error":"Unauthorized"}`, "", true},
		{"body not JSON", req{body: "{oops", header: auth}, 400, `{"error":"Invalid JSON in request body"}`, "", false},
		{"empty body", req{body: "", header: auth}, 400, `{"error":"Invalid JSON in request body"}`, "", false},
		{"JSON that is not a message", req{body: "42", header: auth}, 400, `{"error":"Invalid JSON in request body"}`, "", false},
		{"body over 1 MiB", req{body: padded + " ", header: auth}, 413, `{"error":"Request body too large"}`, "", false},
		{"body over 1 MiB without a length", req{body: padded + " ", header: auth, chunked: true}, 413, `{"error":"Request body too large"}`, "", false},
		{"body of exactly 1 MiB", req{body: padded, header: auth}, 200, "", `"list_workflows"`, false},
		{"Accept without event-stream", req{body: toolsList, header: with(map[string]string{"Accept": "application/json"})}, 406,
			`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Not Acceptable: Client must accept both application/json and text/event-stream"},"id":null}`, "", false},
		{"batch over 100", req{body: batchOf(101), header: auth}, 400,
			`{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: Batch must not exceed 100 messages"},"id":null}`, "", false},
		{"an MCP message", req{body: toolsList, header: auth}, 200, "", `"execute_step"`, false},
		{"a tool call", req{body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"start_run","arguments":{"workflow_id":"w"}}}`, header: auth}, 200, "", `\"command\":\"start_run\"`, false},
		{"GET is not served statelessly", req{method: http.MethodGet, header: auth}, 405, "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, hdr, body := do(t, srv.URL+"/any/path", tc.r)
			if code != tc.code {
				t.Fatalf("status %d, want %d (body %q)", code, tc.code, body)
			}
			if tc.body != "" && body != tc.body {
				t.Errorf("body %q\nwant %q", body, tc.body)
			}
			if tc.contains != "" && !strings.Contains(body, tc.contains) {
				t.Errorf("body %q lacks %q", body, tc.contains)
			}
			if got := hdr.Get("WWW-Authenticate"); tc.authHdr != (got == "Bearer") {
				t.Errorf("WWW-Authenticate = %q", got)
			}
		})
	}
}

func TestOriginIsCheckedAgainstDNSRebinding(t *testing.T) {
	t.Parallel()
	s := newTestServer(&fakeEngine{})
	srv := httptest.NewServer(s.HTTPHandler(HTTPOptions{AllowedOrigins: []string{"https://app.example.com"}, ErrorLog: io.Discard}))
	t.Cleanup(srv.Close)
	cases := []struct {
		origin string
		code   int
	}{
		{"", 200}, // not a browser
		{"http://localhost:5173", 200},
		{"http://127.0.0.1:8080", 200},
		{"http://[::1]:3000", 200},
		{"https://app.example.com", 200},
		{"http://evil.example", 403},
		{"http://localhost.evil.example", 403},
		{"null", 403},
		{"file://", 403},
	}
	for _, tc := range cases {
		t.Run(tc.origin, func(t *testing.T) {
			t.Parallel()
			h := map[string]string{"Accept": okAccept}
			if tc.origin != "" {
				h["Origin"] = tc.origin
			}
			code, _, body := do(t, srv.URL, req{body: toolsList, header: h})
			if code != tc.code {
				t.Errorf("status %d, want %d (%s)", code, tc.code, body)
			}
			if code == 403 && body != bodyBadOrigin {
				t.Errorf("body %q", body)
			}
		})
	}
}

func TestDevModeNeedsNoTokenAndAStartWithoutOneIsRefused(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, err := Token(false, env(nil)); err != ErrNoToken {
		t.Errorf("no token, no dev: %v", err)
	}
	if got := ErrNoToken.Error(); got != "Error: REALM_SERVE_TOKEN is not set.\nSet it to a secret token, or use --dev / REALM_DEV=1 for local development only." {
		t.Errorf("refusal text %q", got)
	}
	if tok, err := Token(false, env(map[string]string{"REALM_SERVE_TOKEN": "x"})); tok != "x" || err != nil {
		t.Errorf("token: %q %v", tok, err)
	}
	if !DevMode(false, env(map[string]string{"REALM_DEV": "1"})) || DevMode(false, env(map[string]string{"REALM_DEV": "0"})) || !DevMode(true, env(nil)) {
		t.Error("DevMode misreads --dev / REALM_DEV")
	}
	if tok, err := Token(true, env(map[string]string{"REALM_SERVE_TOKEN": "x"})); tok != "" || err != nil {
		t.Errorf("dev mode kept a token check: %q %v", tok, err)
	}
}

func TestAPanicWhileHandlingIsA500ThatIsLoggedAndServingGoesOn(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	var calls int
	var mu sync.Mutex
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			panic("store exploded")
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(Guard(next, GuardOptions{ErrorLog: &log, LogPrefix: "realm serve: "}))
	t.Cleanup(srv.Close)
	h := map[string]string{"Accept": okAccept}
	if code, _, body := do(t, srv.URL, req{body: toolsList, header: h}); code != 500 || body != bodyInternal {
		t.Errorf("first: %d %q", code, body)
	}
	if got := log.String(); got != "realm serve: store exploded\n" {
		t.Errorf("log %q", got)
	}
	if code, _, _ := do(t, srv.URL, req{body: toolsList, header: h}); code != 200 {
		t.Errorf("second: %d, want 200", code)
	}
}
