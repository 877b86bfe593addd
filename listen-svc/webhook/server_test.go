package webhook_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/realm-go/realm/listen-svc/webhook"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func hexMAC(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func b64MAC512(secret, msg string) string {
	m := hmac.New(sha512.New, []byte(secret))
	m.Write([]byte(msg))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

var accepted = regexp.MustCompile(`^\{"run_id":"[^"]+","status":"accepted"\}$`)

// delivery is one signed request of a scheme.
type delivery struct {
	path    string
	body    string
	headers map[string]string
}

// signed builds a valid delivery of each scheme; tamper, applied to the
// delivery after signing, breaks it.
func signed(scheme, id string, now time.Time) delivery {
	ts := strconv.FormatInt(now.Unix(), 10)
	switch scheme {
	case "shared_secret":
		body := fmt.Sprintf(`{"type":"ticket-created","id":%s}`, id)
		return delivery{"/shared", body, map[string]string{"X-Webhook-Token": secrets["LISTEN_TEST_SHARED"], "X-Source": "helpdesk"}}
	case "github":
		body := `{"action":"opened"}`
		return delivery{"/gh", body, map[string]string{"X-Hub-Signature-256": "sha256=" + hexMAC(secrets["LISTEN_TEST_GH"], body), "X-GitHub-Delivery": id}}
	case "stripe":
		body := fmt.Sprintf(`{"id":"evt_%s","type":"invoice.paid"}`, id)
		sig := hexMAC(secrets["LISTEN_TEST_STRIPE"], ts+"."+body)
		return delivery{"/stripe", body, map[string]string{"Stripe-Signature": "t=" + ts + ",v1=deadbeef,v1=" + sig}}
	case "hmac":
		body := fmt.Sprintf(`{"event_id":"%s","kind":"invoice.created"}`, id)
		return delivery{"/invoices/inbound", body, map[string]string{"X-Signature": b64MAC512(secrets["LISTEN_TEST_HMAC"], ts+"."+body), "X-Timestamp": ts}}
	}
	panic("unknown scheme " + scheme)
}

var schemeWorkflow = map[string]string{"shared_secret": "tickets", "github": "gh", "stripe": "stripe", "hmac": "invoices"}

func TestEachSignatureSchemeIsAcceptedAndEveryTamperingRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	now := time.Now()
	old := now.Add(-10 * time.Minute)
	tampers := map[string]map[string]func(d *delivery){
		"shared_secret": {
			"wrong secret":   func(d *delivery) { d.headers["X-Webhook-Token"] = "s3cret-tokeN" },
			"missing header": func(d *delivery) { d.headers["X-Webhook-Token"] = "" },
			"prefixed":       func(d *delivery) { d.headers["X-Webhook-Token"] = "Bearer " + secrets["LISTEN_TEST_SHARED"] },
		},
		"github": {
			"body changed":   func(d *delivery) { d.body = strings.Replace(d.body, "opened", "closed", 1) },
			"wrong secret":   func(d *delivery) { d.headers["X-Hub-Signature-256"] = "sha256=" + hexMAC("other", d.body) },
			"missing header": func(d *delivery) { d.headers["X-Hub-Signature-256"] = "" },
			"no prefix":      func(d *delivery) { d.headers["X-Hub-Signature-256"] = hexMAC(secrets["LISTEN_TEST_GH"], d.body) },
			"uppercase hex": func(d *delivery) {
				d.headers["X-Hub-Signature-256"] = "sha256=" + strings.ToUpper(hexMAC(secrets["LISTEN_TEST_GH"], d.body))
			},
		},
		"stripe": {
			"body changed": func(d *delivery) { d.body = strings.Replace(d.body, "paid", "void", 1) },
			"old timestamp": func(d *delivery) {
				ts := strconv.FormatInt(old.Unix(), 10)
				d.headers["Stripe-Signature"] = "t=" + ts + ",v1=" + hexMAC(secrets["LISTEN_TEST_STRIPE"], ts+"."+d.body)
			},
			"wrong secret": func(d *delivery) {
				ts := strconv.FormatInt(now.Unix(), 10)
				d.headers["Stripe-Signature"] = "t=" + ts + ",v1=" + hexMAC("whsec_other", ts+"."+d.body)
			},
			"missing header": func(d *delivery) { d.headers["Stripe-Signature"] = "" },
			"timestamp changed": func(d *delivery) {
				d.headers["Stripe-Signature"] = strings.Replace(d.headers["Stripe-Signature"], "t=", "t=1", 1)
			},
		},
		"hmac": {
			"body changed": func(d *delivery) { d.body = strings.Replace(d.body, "created", "updated", 1) },
			"old timestamp": func(d *delivery) {
				d.headers["X-Timestamp"] = strconv.FormatInt(old.Unix(), 10)
			},
			"wrong secret":      func(d *delivery) { d.headers["X-Signature"] = b64MAC512("other", d.body) },
			"missing header":    func(d *delivery) { d.headers["X-Signature"] = "" },
			"missing timestamp": func(d *delivery) { d.headers["X-Timestamp"] = "" },
			"garbage timestamp": func(d *delivery) { d.headers["X-Timestamp"] = "yesterday" },
		},
	}
	n := 0
	for scheme, cases := range tampers {
		n++
		ok := signed(scheme, strconv.Itoa(1000+n), now)
		status, body := h.post(ok.path, ok.body, ok.headers)
		if status != http.StatusAccepted || !accepted.MatchString(body) {
			t.Fatalf("%s: valid delivery: %d %s\nlogs:\n%s", scheme, status, body, h.logs)
		}
		for name, tamper := range cases {
			n++
			d := signed(scheme, strconv.Itoa(1000+n), now)
			tamper(&d)
			status, body := h.post(d.path, d.body, d.headers)
			if status != http.StatusForbidden || body != `{"error":"forbidden"}` {
				t.Errorf("%s, %s: got %d %s, want 403 forbidden", scheme, name, status, body)
			}
		}
		if got := len(h.runs(schemeWorkflow[scheme])); got != 1 {
			t.Errorf("%s: %d runs in the store, want 1 (only the valid delivery)", scheme, got)
		}
	}
	if !strings.Contains(h.logs.String(), `webhook: verification failed {"path":"/stripe","mode":"stripe"}`) {
		t.Errorf("no verification-failed log line:\n%s", h.logs)
	}
}

func TestTheSameDeliveryTwiceMakesOneRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	d := signed("shared_secret", "102", time.Now())
	status, body := h.post(d.path, d.body, d.headers)
	if status != http.StatusAccepted {
		t.Fatalf("first: %d %s", status, body)
	}
	status, body = h.post(d.path, d.body, d.headers)
	if status != http.StatusOK || body != `{"status":"deduplicated"}` {
		t.Fatalf("second: %d %s", status, body)
	}
	runs := h.runs("tickets")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	if got := h.disp.handed(); len(got) != 1 || got[0] != runs[0].GetRunId() {
		t.Fatalf("handed %v, want the one run %s", got, runs[0].GetRunId())
	}
}

func TestTwentyConcurrentCopiesOfADeliveryMakeOneRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	d := signed("hmac", "evt-20", time.Now())
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var runIDs []string
	runID := regexp.MustCompile(`"run_id":"([^"]+)"`)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, body := h.post(d.path, d.body, d.headers)
			mu.Lock()
			defer mu.Unlock()
			codes[status]++
			if m := runID.FindStringSubmatch(body); m != nil {
				runIDs = append(runIDs, m[1])
			}
			if status == http.StatusForbidden && body != `{"error":"forbidden"}` {
				t.Errorf("403 that is not forbidden: %s", body)
			}
		}()
	}
	wg.Wait()
	// The copies repeat one signed request: the first is served, the
	// others are replays of it (a different delivery of the same event
	// carries its own signature and is deduplicated instead).
	if codes[http.StatusAccepted] != 1 || codes[http.StatusForbidden] != 19 {
		t.Fatalf("replies %v, want one 202 and nineteen 403", codes)
	}
	runs := h.runs("invoices")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	for _, id := range runIDs {
		if id != runs[0].GetRunId() {
			t.Errorf("a reply names run %s, the store holds %s", id, runs[0].GetRunId())
		}
	}
	if got := h.disp.handed(); len(got) != 1 {
		t.Fatalf("handed %d runs to the driver, want 1", len(got))
	}
}

func TestAKnownDeliveryIDForgottenByTheCacheStillMatchesItsRun(t *testing.T) {
	t.Parallel()
	// Two listeners with their own memory (two replicas, or a restart)
	// over one engine: the delivery id as idempotency key makes one run.
	h := newHarness(t, nil)
	d := signed("github", "guid-7", time.Now())
	if status, body := h.post(d.path, d.body, d.headers); status != http.StatusAccepted {
		t.Fatalf("first: %d %s", status, body)
	}
	second := webhook.New(webhook.Options{Catalog: staticOf(t, h), Engine: h.eng, Dispatcher: h.disp})
	ts := httptestServer(t, second)
	status, body := postTo(t, ts+d.path, d.body, d.headers)
	runs := h.runs("gh")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	want := fmt.Sprintf(`{"status":"deduplicated","run_id":"%s","run_phase":"running"}`, runs[0].GetRunId())
	if status != http.StatusOK || body != want {
		t.Fatalf("replay on a fresh listener: %d %s, want 200 %s", status, body, want)
	}
}

func TestOverTheBusyLimitIs503AndNoRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *webhook.Options) { o.MaxConcurrent = 1 })
	// The first request holds the only slot: its body never finishes.
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	deadline := time.Now().Add(10 * time.Second)
	for h.srv.InFlight() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the slow request never took its slot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	status, body := h.post("/open", `{}`, nil)
	if status != http.StatusServiceUnavailable || body != `{"error":"busy","status":"rejected"}` {
		t.Fatalf("got %d %s, want 503 busy", status, body)
	}
	if n := len(h.runs("open")); n != 0 {
		t.Fatalf("%d runs, want none", n)
	}
	// An unknown path is still refused as forbidden, not busy (the path
	// check comes first).
	if status, _ := h.post("/nowhere", `{}`, nil); status != http.StatusForbidden {
		t.Fatalf("unknown path while busy: %d, want 403", status)
	}
}

func TestBadBodiesAre400AndMakeNoRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	tok := map[string]string{"X-Webhook-Token": secrets["LISTEN_TEST_SHARED"]}
	nowTS := strconv.FormatInt(time.Now().Unix(), 10)
	cases := []struct {
		name, path, body string
		headers          map[string]string
		want             string
	}{
		{"not JSON", "/shared", `{"type":`, tok, `{"error":"invalid_json"}`},
		{"params do not fit params_schema", "/shared", `{"type":"ticket-created","id":"abc"}`, tok,
			`{"error":"params_invalid","message":"Invalid params for workflow 'tickets': /ticket_id must be number","status":"rejected"}`},
		{"no dedup id under on_missing_id reject", "/invoices/inbound", `{"kind":"x"}`,
			map[string]string{"X-Signature": b64MAC512(secrets["LISTEN_TEST_HMAC"], nowTS+`.{"kind":"x"}`), "X-Timestamp": nowTS},
			`{"error":"dedup_id_unresolvable","status":"rejected"}`},
	}
	for _, c := range cases {
		status, body := h.post(c.path, c.body, c.headers)
		if status != http.StatusBadRequest || body != c.want {
			t.Errorf("%s: got %d %s, want 400 %s", c.name, status, body, c.want)
		}
	}
	for _, wf := range []string{"tickets", "invoices"} {
		if n := len(h.runs(wf)); n != 0 {
			t.Errorf("%s: %d runs, want none", wf, n)
		}
	}
	if !strings.Contains(h.logs.String(), "webhook: rejected params_invalid — Invalid params for workflow 'tickets': /ticket_id must be number\n") {
		t.Errorf("no params_invalid log line:\n%s", h.logs)
	}
}

func TestThePipelineAnswersInItsOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	tok := secrets["LISTEN_TEST_SHARED"]
	cases := []struct {
		name, method, path, ctype, body string
		headers                         map[string]string
		code                            int
		want                            string
	}{
		{"GET", http.MethodGet, "/shared", "application/json", "", nil, 405, `{"error":"method_not_allowed"}`},
		{"unknown path", http.MethodPost, "/nowhere", "application/json", `{}`, nil, 403, `{"error":"forbidden"}`},
		{"trailing slash is another path", http.MethodPost, "/shared/", "application/json", `{}`, nil, 403, `{"error":"forbidden"}`},
		{"not JSON media type", http.MethodPost, "/shared", "text/plain", `{}`, map[string]string{"X-Webhook-Token": tok}, 415, `{"error":"unsupported_media_type"}`},
		{"media type with charset, unsigned", http.MethodPost, "/shared", "Application/JSON; charset=utf-8", `{}`, nil, 403, `{"error":"forbidden"}`},
		{"filtered out", http.MethodPost, "/shared?x=1", "application/json", `{"type":"ticket-closed","id":5}`, map[string]string{"X-Webhook-Token": tok}, 200, `{"status":"ignored"}`},
		{"number matches its text in a filter", http.MethodPost, "/shared", "application/json", `{"type":"ticket-updated","id":77}`, map[string]string{"X-Webhook-Token": tok}, 202, ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, h.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if resp.StatusCode != c.code || (c.want != "" && b.String() != c.want) {
			t.Errorf("%s: got %d %s, want %d %s", c.name, resp.StatusCode, b.String(), c.code, c.want)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", c.name, ct)
		}
	}
	runs := h.runs("tickets")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want the one accepted", len(runs))
	}
}

func TestARepeatedSecurityHeaderIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	req, _ := http.NewRequest(http.MethodPost, h.url+"/shared", strings.NewReader(`{"type":"ticket-created","id":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-Webhook-Token", secrets["LISTEN_TEST_SHARED"])
	req.Header.Add("X-Webhook-Token", secrets["LISTEN_TEST_SHARED"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("got %d, want 403", resp.StatusCode)
	}
	if !strings.Contains(h.logs.String(), `webhook: duplicated security header {"path":"/shared","header":"x-webhook-token"}`) {
		t.Errorf("no duplicated-header log:\n%s", h.logs)
	}
	if n := len(h.runs("tickets")); n != 0 {
		t.Fatalf("%d runs, want none", n)
	}
}

func TestAnOversizedBodyClosesTheConnectionWithoutAReply(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *webhook.Options) { o.MaxBodyBytes = 64 })
	big := `{"pad":"` + strings.Repeat("x", 100) + `"}`
	req, _ := http.NewRequest(http.MethodPost, h.url+"/open", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got a reply %d, want the connection closed", resp.StatusCode)
	}
	if n := len(h.runs("open")); n != 0 {
		t.Fatalf("%d runs, want none", n)
	}
}

func TestAFailedHandoverEndsTheRunAndAnswers500(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.disp.err = errors.New("agent-svc: connection refused")
	status, body := h.post("/open", `{}`, nil)
	runs := h.runs("open")
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	want := fmt.Sprintf(`{"error":"spawn_failed","run_id":"%s","status":"failed"}`, runs[0].GetRunId())
	if status != http.StatusInternalServerError || body != want {
		t.Fatalf("got %d %s, want 500 %s", status, body, want)
	}
	// The run ends failed, sealed spawn_failure (workflow-file spec §16).
	st, err := h.eng.GetRunState(context.Background(), &realmv1.GetRunStateRequest{RunId: runs[0].GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	if s := st.GetState(); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_FAILED || s.GetSealedByArm() != "spawn_failure" {
		t.Fatalf("after a failed handover: phase %v, sealed by %q", s.GetRunPhase(), s.GetSealedByArm())
	}
}
