package web_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// chromium is the browser the tests drive: $CHROMIUM, else one on PATH.
// scripts/test.sh (make test) installs Debian's chromium first when there
// is none (scripts/chromium.sh), so a missing browser fails the test with
// the way to get one rather than skipping it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: set CHROMIUM to one, or run scripts/chromium.sh (make test runs it), which installs Debian's chromium package")
	return ""
}

// artifacts is where the screenshots are kept: $REALM_ARTIFACTS/console
// when set (CI keeps that folder), else the test's temporary folder.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if a := os.Getenv("REALM_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBrowser drives headless Chromium through the console as a person
// signed in by the reverse proxy: the runs list, a run page, the inbox,
// a non-owner's refusal, the owner's answer, and the inbox updating live
// when another door (a direct gRPC call) answers. One browser, the steps in
// order: each starts from what the one before left.
func TestBrowser(t *testing.T) {
	eng := startEngine(t)
	ts := startConsole(t, eng, loopbackProxy, 100*time.Millisecond)
	shots := artifacts(t)

	payout := startRun(t, eng, "payout", map[string]any{"amount": 120, "payee": "ACME"})
	payoutGate := pendingGate(t, eng, payout).GetGateId()
	time.Sleep(2 * time.Millisecond) // distinct creation times order the list
	review := startRun(t, eng, "review", map[string]any{"title": "Q3 report"})
	reviewGate := pendingGate(t, eng, review).GetGateId()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in a container has no user namespace for the sandbox
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()

	// as makes the browser's requests (page loads, forms, the event stream,
	// the live fetch) carry the proxy's header naming person.
	as := func(person string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{proxyHeader: person}})
			return err
		})
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				return err
			}
			path := filepath.Join(shots, name+".png")
			t.Logf("screenshot: %s", path)
			return os.WriteFile(path, png, 0o644)
		})
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	run := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatal(err)
		}
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	click := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
	run(as("finance"))

	t.Run("the runs list shows every run, newest first", func(t *testing.T) {
		run(chromedp.Navigate(ts.URL+"/runs"), visible("#runs tbody tr.run"), shot("runs"))
		body := text("#runs tbody")
		if i, j := strings.Index(body, review), strings.Index(body, payout); i < 0 || j < 0 || i > j {
			t.Fatalf("want %s then %s:\n%s", review, payout, body)
		}
		if s := text("#signin"); !strings.Contains(s, "Signed in through the reverse proxy") || !strings.Contains(s, "finance") {
			t.Fatalf("sign-in line: %q", s)
		}
	})

	t.Run("a run page shows its steps, its gate's question and the acts", func(t *testing.T) {
		run(chromedp.Navigate(ts.URL+"/runs/"+payout), visible("#steps"), shot("run"))
		if p := text("#phase"); p != "gate_waiting" {
			t.Fatalf("phase %q", p)
		}
		if q := text(".gate .question"); q != "Pay 120 EUR to ACME?" {
			t.Fatalf("question %q", q)
		}
		if s := text("#steps"); !strings.Contains(s, "approve") || !strings.Contains(s, "waiting at its gate") {
			t.Fatalf("steps %q", s)
		}
		if s := text("main"); !strings.Contains(s, "realm run resume "+payout) {
			t.Fatalf("no resume command on the page:\n%s", s)
		}
	})

	t.Run("the inbox lists every open gate with its choices", func(t *testing.T) {
		run(chromedp.Navigate(ts.URL+"/gates"), visible(`section[data-gate="`+reviewGate+`"]`), shot("gates"))
		for _, sel := range []string{
			`section[data-gate="` + payoutGate + `"] button[value="pay"]`,
			`section[data-gate="` + payoutGate + `"] button[value="hold"]`,
			`section[data-gate="` + reviewGate + `"] button[value="publish"]`,
		} {
			run(visible(sel))
		}
	})

	t.Run("a non-owner is refused with a sentence and the gate stays open", func(t *testing.T) {
		// The page was rendered for finance; the proxy now vouches for
		// mallory, so the console checks the owner as the answer comes.
		run(as("mallory"), click(`section[data-gate="`+payoutGate+`"] button[value="pay"]`), visible("#refused"), shot("refused"))
		want := "Only @finance may answer this gate (its owner); you are signed in as mallory, so the console will not record your answer."
		if s := text("#refused"); s != want {
			t.Fatalf("refusal %q, want %q", s, want)
		}
		if pendingGate(t, eng, payout) == nil {
			t.Fatal("mallory's click answered the gate")
		}
		// Rendered for mallory, the gate offers no buttons and says why.
		if s := text(`section[data-gate="` + payoutGate + `"] .owner`); !strings.Contains(s, "Only @finance may answer") {
			t.Fatalf("owner note %q", s)
		}
	})

	t.Run("the owner answers from the inbox, recorded under the proxy's name", func(t *testing.T) {
		run(as("finance"), chromedp.Navigate(ts.URL+"/gates"),
			click(`section[data-gate="`+payoutGate+`"] button[value="pay"]`),
			visible("#notice"), shot("answered"))
		if s := text("#notice"); !strings.Contains(s, `Answered "pay" as finance.`) {
			t.Fatalf("notice %q", s)
		}
		if pendingGate(t, eng, payout) != nil {
			t.Fatal("the gate is still open")
		}
	})

	t.Run("the inbox updates live when another door answers", func(t *testing.T) {
		run(chromedp.Navigate(ts.URL+"/gates"),
			visible(`body[data-live="connected"]`),
			visible(`section[data-gate="`+reviewGate+`"]`))
		by := "someone at the CLI"
		if _, err := eng.SubmitHumanResponse(testCtx(t), &realmv1.SubmitHumanResponseRequest{RunId: review, GateId: reviewGate, Choice: "publish", RespondedBy: &by}); err != nil {
			t.Fatal(err)
		}
		run(visible("#no-gates"), visible("#live"), shot("live"))
	})
}
