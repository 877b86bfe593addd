package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/realm-go/realm/console-svc/identity"
	"github.com/realm-go/realm/console-svc/web"
	"github.com/realm-go/realm/engine-svc/enginetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// post sends a same-origin form, as the console's own page does, in the
// name of person (empty: no identity header).
func post(t *testing.T, base, path, person string, form url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if person != "" {
		req.Header.Set(proxyHeader, person)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func get(t *testing.T, url, person string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if person != "" {
		req.Header.Set(proxyHeader, person)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// outcome is the sentence a redirect after an act carries.
func outcome(t *testing.T, resp *http.Response) (key, msg string) {
	t.Helper()
	if resp.StatusCode != http.StatusSeeOther {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("want a redirect after the act, got %d: %s", resp.StatusCode, b)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"notice", "refused"} {
		if v := u.Query().Get(k); v != "" {
			return k, v
		}
	}
	t.Fatalf("redirect %s carries no outcome", u)
	return "", ""
}

func TestAnsweringAGateRecordsTheSignedInPersonAndOnlyTheOwner(t *testing.T) {
	eng := startEngine(t)
	ts := startConsole(t, eng, loopbackProxy, time.Second)
	for _, tc := range []struct {
		name, person, choice string
		wantKey, wantMsg     string
		wantOpen             bool
	}{
		{"a non-owner is refused with a sentence, and the gate stays open", "mallory", "pay", "refused", "Only @finance may answer this gate (its owner); you are signed in as mallory", true},
		{"a choice the gate does not offer is the engine's refusal, shown as it comes", "finance", "maybe", "refused", "Choice 'maybe' is not valid", true},
		{"the owner's answer is recorded under the name the proxy vouches for", "finance", "pay", "notice", `Answered "pay" as finance.`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := startRun(t, eng, "payout", map[string]any{"amount": 120, "payee": "ACME"})
			g := pendingGate(t, eng, run)
			key, msg := outcome(t, post(t, ts.URL, "/runs/"+run+"/gates/"+g.GetGateId(), tc.person, url.Values{"choice": {tc.choice}}))
			if key != tc.wantKey || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("got %s %q, want %s containing %q", key, msg, tc.wantKey, tc.wantMsg)
			}
			if open := pendingGate(t, eng, run) != nil; open != tc.wantOpen {
				t.Fatalf("gate open after the act: %v, want %v", open, tc.wantOpen)
			}
			if !tc.wantOpen {
				exp, err := eng.ExportRun(testCtx(t), &realmv1.ExportRunRequest{RunId: run})
				if err != nil {
					t.Fatal(err)
				}
				var compact bytes.Buffer
				if err := json.Compact(&compact, exp.GetBundle()); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(compact.String(), `"responded_by":"finance"`) {
					t.Fatalf("the record does not name finance as the one who answered: %s", exp.GetBundle())
				}
			}
		})
	}
}

func TestSignInRefusesWhatItCannotVouchFor(t *testing.T) {
	eng := startEngine(t)
	ts := startConsole(t, eng, loopbackProxy, time.Second)
	elsewhere := startConsole(t, eng, identity.Proxy{Header: proxyHeader, Trusted: nil}, time.Second)
	for _, tc := range []struct {
		name, base, person string
		want               int
		wantMsg            string
	}{
		{"no identity header: nobody is signed in", ts.URL, "", http.StatusUnauthorized, "The reverse proxy sent no X-Forwarded-User header"},
		{"the header from an untrusted address is not believed", elsewhere.URL, "finance", http.StatusForbidden, "did not come through it"},
		{"the header from the trusted proxy names the person", ts.URL, "finance", http.StatusOK, "You are <span id=\"person\">finance</span>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, tc.base+"/runs", tc.person)
			if resp.StatusCode != tc.want || !strings.Contains(body, tc.wantMsg) {
				t.Fatalf("got %d, want %d with %q:\n%s", resp.StatusCode, tc.want, tc.wantMsg, body)
			}
		})
	}
}

func TestACrossSiteFormCannotAnswerAGate(t *testing.T) {
	eng := startEngine(t)
	ts := startConsole(t, eng, identity.Dev{Name: "dev"}, time.Second)
	run := startRun(t, eng, "review", map[string]any{"title": "Q3"})
	g := pendingGate(t, eng, run)
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/runs/"+run+"/gates/"+g.GetGateId(), strings.NewReader("choice=publish"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site POST got %d, want 403", resp.StatusCode)
	}
	if pendingGate(t, eng, run) == nil {
		t.Fatal("the cross-site POST answered the gate")
	}
}

func TestPagesCarryAStrictContentSecurityPolicyAndSayDevMode(t *testing.T) {
	eng := startEngine(t)
	ts := startConsole(t, eng, identity.Dev{Name: "dev"}, time.Second)
	run := startRun(t, eng, "review", map[string]any{"title": "Q3"})
	for _, path := range []string{"/runs", "/runs/" + run, "/gates"} {
		resp, body := get(t, ts.URL+path, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, resp.StatusCode, body)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Fatalf("%s: CSP %q is not strict", path, csp)
		}
		if !strings.Contains(body, "Dev mode: no sign-in, loopback only.") {
			t.Fatalf("%s does not say dev mode:\n%s", path, body)
		}
	}
}

func TestRunsListPagesNewestFirstAndFilters(t *testing.T) {
	eng := startEngine(t)
	ts := startConsole(t, eng, identity.Dev{Name: "dev"}, time.Second)
	var ids []string // oldest first
	for i := range 3 {
		ids = append(ids, startRun(t, eng, "review", map[string]any{"title": i}))
		time.Sleep(2 * time.Millisecond) // distinct creation times order the index
	}
	ids = append(ids, startRun(t, eng, "payout", map[string]any{"amount": 1, "payee": "x"}))
	// Pages of 2 (startConsole's page size), newest first.
	_, first := get(t, ts.URL+"/runs", "")
	if !strings.Contains(first, ids[3]) || !strings.Contains(first, ids[2]) || strings.Contains(first, ids[1]) || strings.Index(first, ids[3]) > strings.Index(first, ids[2]) {
		t.Fatalf("first page should hold the two newest runs, newest first:\n%s", first)
	}
	i := strings.Index(first, `id="next" href="`)
	if i < 0 {
		t.Fatalf("no link to the next page:\n%s", first)
	}
	next := first[i+len(`id="next" href="`):]
	next = strings.ReplaceAll(next[:strings.Index(next, `"`)], "&amp;", "&")
	_, second := get(t, ts.URL+next, "")
	if !strings.Contains(second, ids[1]) || !strings.Contains(second, ids[0]) || strings.Contains(second, ids[2]) {
		t.Fatalf("second page should hold the two oldest runs:\n%s", second)
	}
	_, payout := get(t, ts.URL+"/runs?workflow=payout&phase=gate_waiting", "")
	if !strings.Contains(payout, ids[3]) || strings.Contains(payout, ids[0]) {
		t.Fatalf("the workflow filter should keep the payout run only:\n%s", payout)
	}
	if resp, body := get(t, ts.URL+"/runs?phase=sideways", ""); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "is not one of running, gate_waiting") {
		t.Fatalf("an unknown phase: %d\n%s", resp.StatusCode, body)
	}
}

func TestEventsSayChangedWhenAnotherDoorAnswers(t *testing.T) {
	eng := startEngine(t)
	ts := startConsole(t, eng, identity.Dev{Name: "dev"}, 50*time.Millisecond)
	for _, view := range []string{"gates", "run"} {
		t.Run(view, func(t *testing.T) {
			run := startRun(t, eng, "review", map[string]any{"title": "Q3"})
			g := pendingGate(t, eng, run)
			stream := "/events?view=gates"
			if view == "run" {
				stream = "/events?run=" + run
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+stream, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("content type %q", ct)
			}
			lines := bufio.NewScanner(resp.Body)
			if !lines.Scan() || !strings.HasPrefix(lines.Text(), "retry:") {
				t.Fatalf("stream did not open with retry: %q", lines.Text())
			}
			if view == "gates" {
				// Another door answers: the direct gRPC call.
				by := "someone at the CLI"
				if _, err := eng.SubmitHumanResponse(testCtx(t), &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: g.GetGateId(), Choice: "publish", RespondedBy: &by}); err != nil {
					t.Fatal(err)
				}
			} else {
				// The run page: an answer from another door moves the version.
				by := "someone at the CLI"
				if _, err := eng.SubmitHumanResponse(testCtx(t), &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: g.GetGateId(), Choice: "discard", RespondedBy: &by}); err != nil {
					t.Fatal(err)
				}
			}
			for lines.Scan() {
				if lines.Text() == "event: changed" {
					return
				}
			}
			t.Fatalf("no changed event before the deadline: %v", lines.Err())
		})
	}
}

// An event stream's polling lives in its request: when the browser leaves,
// the stream ends and stops asking the engine.
func TestAnEventStreamEndsWhenTheBrowserLeaves(t *testing.T) {
	eng := startEngine(t)
	s, err := web.New(web.Options{Engine: eng, Identity: identity.Dev{Name: "dev"}, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/events?view=gates", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Streams(); n != 1 {
		t.Fatalf("%d streams open while the browser reads, want 1", n)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for s.Streams() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still open 10s after the browser left", s.Streams())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A gate whose time runs out is carried out by the engine's expiry timer
// (here the timer's call, AdvanceRun expiry_timer, once the clock has
// passed the deadline): the inbox's stream says changed and the gate is
// gone from the page.
func TestEventsSayChangedWhenAGateExpires(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	eng := startEngineWith(t, enginetest.Options{Clock: func() time.Time { return time.UnixMilli(now.Load()) }})
	ts := startConsole(t, eng, identity.Dev{Name: "dev"}, 20*time.Millisecond)
	run := startRun(t, eng, "expiring", nil)
	if _, body := get(t, ts.URL+"/gates", ""); !strings.Contains(body, "Ship the order?") {
		t.Fatalf("the open gate is not in the inbox:\n%s", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/events?view=gates", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Scan() // retry:

	now.Add((61 * time.Second).Milliseconds())
	adv, err := eng.AdvanceRun(testCtx(t), &realmv1.AdvanceRunRequest{RunId: run, ExpiryTimer: true, Caller: &realmv1.Caller{By: "timer", BySource: "stated"}})
	if err != nil || adv.GetReply().GetExpiryEnactedVia() == "" {
		t.Fatalf("the expiry was not carried out: %v %v", err, adv.GetReply().GetErrors())
	}
	for lines.Scan() {
		if lines.Text() == "event: changed" {
			if _, body := get(t, ts.URL+"/gates", ""); strings.Contains(body, "Ship the order?") || !strings.Contains(body, `id="no-gates"`) {
				t.Fatalf("the expired gate is still in the inbox:\n%s", body)
			}
			return
		}
	}
	t.Fatalf("no changed event before the deadline: %v", lines.Err())
}
