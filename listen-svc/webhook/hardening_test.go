package webhook_test

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/listen-svc/webhook"
	"github.com/realm-go/realm/pkg/trigger"
)

// plain signs body for the dedup-less triggers (hmac-plain, stripe-plain,
// gh-plain) at ts: with no dedup id, only replay protection stands
// between a captured request and a second run.
func plain(scheme, body string, ts time.Time) delivery {
	t := strconv.FormatInt(ts.Unix(), 10)
	switch scheme {
	case "hmac":
		return delivery{"/hmac-plain", body, map[string]string{"X-Signature": hexMAC(secrets["LISTEN_TEST_HMAC"], t+"."+body), "X-Timestamp": t}}
	case "stripe":
		return delivery{"/stripe-plain", body, map[string]string{"Stripe-Signature": "t=" + t + ",v1=" + hexMAC(secrets["LISTEN_TEST_STRIPE"], t+"."+body)}}
	case "github":
		return delivery{"/gh-plain", body, map[string]string{"X-Hub-Signature-256": "sha256=" + hexMAC(secrets["LISTEN_TEST_GH"], body), "X-GitHub-Delivery": "guid-1"}}
	}
	panic(scheme)
}

func TestAReplayedRequestIsRefusedEvenWithAFreshLookingTimestamp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	captured := plain("hmac", `{"kind":"invoice.created"}`, time.Now().Add(-2*time.Minute))
	if status, body := h.post(captured.path, captured.body, captured.headers); status != http.StatusAccepted {
		t.Fatalf("the original request: %d %s, want 202", status, body)
	}
	// The attacker has the body and its signature; a fresh timestamp
	// would pass any age check, but the timestamp is signed.
	fresh := delivery{captured.path, captured.body, map[string]string{
		"X-Signature": captured.headers["X-Signature"], "X-Timestamp": strconv.FormatInt(time.Now().Unix(), 10)}}
	if status, body := h.post(fresh.path, fresh.body, fresh.headers); status != http.StatusForbidden {
		t.Errorf("replay with a fresh timestamp: %d %s, want 403", status, body)
	}
	// Verbatim, within the window: the same signature again.
	for _, scheme := range []string{"hmac", "stripe"} {
		d := captured
		if scheme == "stripe" {
			d = plain("stripe", `{"type":"invoice.paid"}`, time.Now())
			if status, body := h.post(d.path, d.body, d.headers); status != http.StatusAccepted {
				t.Fatalf("stripe original: %d %s, want 202", status, body)
			}
		}
		if status, body := h.post(d.path, d.body, d.headers); status != http.StatusForbidden || body != `{"error":"forbidden"}` {
			t.Errorf("%s verbatim replay: %d %s, want 403 forbidden", scheme, status, body)
		}
	}
	for _, wf := range []string{"hmac-plain", "stripe-plain"} {
		if n := len(h.runs(wf)); n != 1 {
			t.Errorf("%s: %d runs, want 1", wf, n)
		}
	}
	if !strings.Contains(h.logs.String(), `webhook: replayed request refused {"path":"/hmac-plain","mode":"hmac"}`) {
		t.Errorf("no replay log line:\n%s", h.logs)
	}
}

func TestATimestampBeyondTheToleranceEitherWayIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	now := time.Now()
	cases := []struct {
		name string
		at   time.Duration
		want int
	}{
		{"a minute ahead (clock skew)", time.Minute, http.StatusAccepted},
		{"four minutes old", -4 * time.Minute, http.StatusAccepted},
		{"ten minutes ahead", 10 * time.Minute, http.StatusForbidden},
		{"a day ahead", 24 * time.Hour, http.StatusForbidden},
		{"ten minutes old (default tolerance 5 min)", -10 * time.Minute, http.StatusForbidden},
	}
	for i, c := range cases {
		for _, scheme := range []string{"hmac", "stripe"} {
			d := plain(scheme, `{"n":`+strconv.Itoa(i)+`}`, now.Add(c.at))
			if status, body := h.post(d.path, d.body, d.headers); status != c.want {
				t.Errorf("%s, %s: %d %s, want %d", scheme, c.name, status, body, c.want)
			}
		}
	}
}

func TestAVerbatimGitHubReplayIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	d := plain("github", `{"action":"opened","number":7}`, time.Now())
	if status, body := h.post(d.path, d.body, d.headers); status != http.StatusAccepted {
		t.Fatalf("original: %d %s, want 202", status, body)
	}
	if status, body := h.post(d.path, d.body, d.headers); status != http.StatusForbidden {
		t.Errorf("verbatim replay: %d %s, want 403", status, body)
	}
	// X-GitHub-Delivery is not signed: a replay with a fresh one is
	// still the same signed body.
	d.headers["X-GitHub-Delivery"] = "guid-2"
	if status, body := h.post(d.path, d.body, d.headers); status != http.StatusForbidden {
		t.Errorf("replay with a fresh delivery id: %d %s, want 403", status, body)
	}
	if n := len(h.runs("gh-plain")); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

var errNoAgent = errors.New("agent-svc: connection refused")

func TestARequestAnsweredWithAServerErrorMayBeSentAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.disp.set(errNoAgent, nil)
	d := plain("github", `{"action":"opened","number":8}`, time.Now())
	if status, body := h.post(d.path, d.body, d.headers); status != http.StatusInternalServerError {
		t.Fatalf("failed hand-off: %d %s, want 500", status, body)
	}
	h.disp.set(nil, nil)
	if status, body := h.post(d.path, d.body, d.headers); status != http.StatusAccepted {
		t.Fatalf("the sender's retry: %d %s, want 202 (not a replay)", status, body)
	}
}

func TestModeNoneIsNotMountedOffLoopback(t *testing.T) {
	t.Parallel()
	var decls []webhook.Declared
	for _, n := range []string{"open", "tickets"} {
		decls = append(decls, declare(t, n))
	}
	want := "listen: workflow 'open' uses auth.mode 'none' on a listener bound to a non-loopback address: path '/open' would start runs for anyone who reaches it; give it a verifying auth.mode, or bind to 127.0.0.1"
	table, problems := webhook.Build(decls, getenv, false)
	if len(problems) != 1 || problems[0].Error() != want {
		t.Errorf("problems %v, want %q", problems, want)
	}
	if table.Lookup("/open") != nil || table.Lookup("/shared") == nil {
		t.Errorf("mounts %v: want /shared only", table.Mounts())
	}
	srv := webhook.New(webhook.Options{Catalog: webhook.Static{T: table}})
	if status, body := postTo(t, httptestServer(t, srv)+"/open", `{}`, nil); status != http.StatusForbidden {
		t.Errorf("POST /open: %d %s, want 403", status, body)
	}
	if table, problems := webhook.Build(decls, getenv, true); len(problems) != 0 || table.Lookup("/open") == nil {
		t.Errorf("on loopback: problems %v, /open mounted %v", problems, table.Lookup("/open") != nil)
	}
	for host, loop := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "0.0.0.0": false, "": false, "10.0.0.1": false, "::": false} {
		if webhook.IsLoopback(host) != loop {
			t.Errorf("IsLoopback(%q) = %v", host, !loop)
		}
	}
}

func TestABurstOverTheRateLimitIs429WithRetryAfter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *webhook.Options) { o.RateLimit = &trigger.RateLimit{PerSecond: 1, Burst: 1} })
	post := func(path string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String(), resp.Header.Get("Retry-After")
	}
	// limited: its own rate_limit {per_second: 0.5, burst: 2}.
	for i, want := range []int{http.StatusAccepted, http.StatusAccepted, http.StatusTooManyRequests} {
		status, body, retry := post("/limited")
		if status != want {
			t.Fatalf("request %d: %d %s, want %d", i+1, status, body, want)
		}
		if status == http.StatusTooManyRequests && (body != `{"error":"rate_limited","status":"rejected"}` || retry != "2") {
			t.Errorf("429 body %s Retry-After %q, want rate_limited and 2", body, retry)
		}
	}
	// open: the listener's default (--rate-limit 1:1).
	if status, _, _ := post("/open"); status != http.StatusAccepted {
		t.Fatalf("first /open: %d", status)
	}
	if status, _, retry := post("/open"); status != http.StatusTooManyRequests || retry != "1" {
		t.Errorf("second /open: %d Retry-After %q, want 429 and 1", status, retry)
	}
	if n := len(h.runs("limited")); n != 2 {
		t.Errorf("%d runs of limited, want 2", n)
	}
}

func TestAHeaderValueThatIsNotUTF8Is400(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := `{"type":"ticket-created","id":31}`
	// Raw bytes: Go's client would refuse to send them.
	raw := "POST /shared HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
		"X-Webhook-Token: " + secrets["LISTEN_TEST_SHARED"] + "\r\nX-Source: help\xff\xfedesk\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || b.String() != `{"error":"invalid_header","status":"rejected"}` {
		t.Errorf("got %d %s, want 400 invalid_header", resp.StatusCode, b.String())
	}
	if n := len(h.runs("tickets")); n != 0 {
		t.Errorf("%d runs, want none", n)
	}
}
