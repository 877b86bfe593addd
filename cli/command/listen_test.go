package command

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/realm-go/realm/engine-svc/enginetest"
)

const noModelAny = "Error: --model is required: realm has no default model, and realm listen starts realm agent for every run. Each one picks its provider from the API key it finds (OpenAI when both are set; choose one with --provider). Anthropic lists its models at https://platform.claude.com/docs/en/models/overview; OpenAI at https://developers.openai.com/api/docs/models. Nothing was started."

func TestListenRefusesBadFlagsAndWorkflowsInTheOriginalsWords(t *testing.T) {
	t.Parallel()
	run := runner("127.0.0.1:1") // never reached: every case stops before
	env := map[string]string{"WH_SECRET": "x"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"llm-timeout zero", []string{"listen", "--model", "m", "--llm-timeout", "0"},
			"error: option '--llm-timeout <seconds>' argument '0' is invalid. --llm-timeout must be a positive integer number of seconds."},
		{"provider misspelt", []string{"listen", "--model", "m", "--provider", "antropic"},
			"error: option '--provider <provider>' argument 'antropic' is invalid. --provider must be openai or anthropic."},
		{"no model, anthropic", []string{"listen", "--provider", "anthropic"},
			"Error: --model is required: realm has no default model, and realm listen starts realm agent --provider anthropic for every run. Name an Anthropic model; Anthropic lists them at https://platform.claude.com/docs/en/models/overview. Nothing was started."},
		{"no model, openai", []string{"listen", "--provider", "openai"},
			"Error: --model is required: realm has no default model, and realm listen starts realm agent --provider openai for every run. Name an OpenAI model; OpenAI lists them at https://developers.openai.com/api/docs/models. Nothing was started."},
		{"whitespace model", []string{"listen", "--model", "  ", "testdata/listen/open.yaml"}, noModelAny},
		{"model checked before any workflow is read", []string{"listen", "nowhere"}, noModelAny},
		{"no trigger anywhere", []string{"listen", "--model", "m", "testdata/listen/plain.yaml"},
			"Error: no workflows with a trigger: block to mount."},
		{"path collision", []string{"listen", "--model", "m", "testdata/listen/open.yaml", "testdata/listen/dup.yaml"},
			"Error: listen: path collision on '/open' — workflow 'dup' conflicts with 'open'"},
		{"rate limit not a number", []string{"listen", "--model", "m", "--rate-limit", "fast", "testdata/listen/open.yaml"},
			"error: option '--rate-limit <per_second[:burst]>' argument 'fast' is invalid. --rate-limit must be <requests per second>[:<burst>] with both above 0 (e.g. 10:20), or off."},
		{"rate limit burst zero", []string{"listen", "--model", "m", "--rate-limit", "10:0", "testdata/listen/open.yaml"},
			"error: option '--rate-limit <per_second[:burst]>' argument '10:0' is invalid. --rate-limit must be <requests per second>[:<burst>] with both above 0 (e.g. 10:20), or off."},
		{"invalid trigger", []string{"listen", "--model", "m", "testdata/listen/badtrigger.yaml"},
			"Error: failed to load workflow 'testdata/listen/badtrigger.yaml': Invalid workflow: trigger/auth/algorithm must be equal to one of the allowed values (line 6)"},
	}
	for _, c := range cases {
		r := run(env, c.args...)
		if r.code != ExitRefused {
			t.Errorf("%s: exit %d, want 1 (stderr %q)", c.name, r.code, r.stderr)
		}
		if !strings.HasSuffix(r.stderr, c.want+"\n") {
			t.Errorf("%s: stderr = %q, want it to end with %q", c.name, r.stderr, c.want)
		}
	}
	r := run(nil, "listen", "--model", "m", "testdata/listen/shared.yaml")
	assertOneLine(t, r.stderr, "Error: listen: workflow 'shared' references secret env var 'WH_SECRET' which is not set")
	r = run(nil, "listen", "--model", "m", "testdata/listen/nowhere")
	if !strings.HasPrefix(r.stderr, "Error: failed to load workflow 'testdata/listen/nowhere/workflow.yaml': Failed to read workflow file: ") || r.code != ExitRefused {
		t.Errorf("missing folder: %d %q", r.code, r.stderr)
	}
	r = run(nil, "webhook", "--anything")
	assertOneLine(t, r.stderr, "`realm webhook` has been removed. Use `realm listen` with a `trigger:` block (auth.mode: github + a params_map for the PR fields) in your workflow instead. See `realm listen --help`.")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestListenStartsWithTheOriginalsLinesServesAndStopsCleanly(t *testing.T) {
	t.Parallel()
	addr := enginetest.Start(t, "miniredis")
	var out, errb lockedBuffer
	vars := map[string]string{"REALM_ENGINE_ADDR": addr, "WH_SECRET": "s3cret", "REALM_AGENT_ADDR": "127.0.0.1:1"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"listen", "--model", "m", "--port", "0", "--dedup-store", "memory",
			"testdata/listen/plain.yaml", "testdata/listen/open.yaml", "testdata/listen/shared.yaml"},
			Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }})
	}()
	ready := regexp.MustCompile(`realm listen on 127\.0\.0\.1:(\d+) — 2 workflow\(s\) mounted\n`)
	deadline := time.Now().Add(20 * time.Second)
	for !ready.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	port := ready.FindStringSubmatch(out.String())[1]
	wantOut := `listen: workflow has no trigger block — not mounted {"workflow":"plain"}` + "\n" +
		`listen: mounted {"workflow":"open","path":"/open","mode":"none"}` + "\n" +
		`listen: mounted {"workflow":"shared","path":"/shared","mode":"shared_secret"}` + "\n" +
		"realm listen on 127.0.0.1:" + port + " — 2 workflow(s) mounted\n"
	if out.String() != wantOut {
		t.Errorf("stdout:\n%s\nwant:\n%s", out.String(), wantOut)
	}
	wantErr := "listen: workflow 'open' uses auth.mode 'none' — webhook verification is DISABLED for path '/open'. Use only on a trusted network.\n"
	if errb.String() != wantErr {
		t.Errorf("stderr:\n%q\nwant:\n%q", errb.String(), wantErr)
	}
	resp, err := http.Post("http://127.0.0.1:"+port+"/shared", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("unsigned request: %d, want 403", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("exit %d after stop, want 0; stderr:\n%s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("realm listen did not stop")
	}
	if !strings.HasSuffix(out.String(), `listen: shutting down {"reason":"stop"}`+"\n") {
		t.Errorf("no shutdown line:\n%s", out.String())
	}
}

// startListen runs `realm listen` with args on a free port until the test
// ends, and returns its address once it serves.
func startListen(t *testing.T, vars map[string]string, args ...string) string {
	t.Helper()
	var out, errb lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"listen", "--model", "m", "--port", "0"}, args...),
			Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("realm listen did not stop")
		}
	})
	ready := regexp.MustCompile(`realm listen on (127\.0\.0\.1:\d+) — `)
	deadline := time.Now().Add(20 * time.Second)
	for !ready.MatchString(out.String()) {
		select {
		case code := <-done:
			t.Fatalf("realm listen exited %d:\n%s\nstderr:\n%s", code, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ready.FindStringSubmatch(out.String())[1]
}

// --rate-limit is listen-svc's: a trigger without its own rate_limit gets
// it, the request over it is 429 with Retry-After, and with a Redis every
// listener on it draws on one bucket. One request in 1000 s: no token
// comes back during the test. (agent-svc is unreachable, so the request
// served fails its hand-off: 500, not 429.)
func TestListenRateLimitIsSharedByListenersOnOneRedis(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	vars := map[string]string{"REALM_ENGINE_ADDR": enginetest.Start(t, "miniredis"), "REALM_AGENT_ADDR": "127.0.0.1:1", "REDIS_URL": "redis://" + m.Addr()}
	one := startListen(t, vars, "--rate-limit", "0.001:1", "testdata/listen/open.yaml")
	two := startListen(t, vars, "--rate-limit", "0.001:1", "testdata/listen/open.yaml")
	post := func(addr string) (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+addr+"/open", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if status, _ := post(one); status == http.StatusTooManyRequests {
		t.Fatalf("first request: 429, want it served")
	}
	for _, addr := range []string{two, one} {
		if status, retry := post(addr); status != http.StatusTooManyRequests || retry != "1000" {
			t.Errorf("request to %s after the burst: %d Retry-After %q, want 429 and 1000", addr, status, retry)
		}
	}
}
