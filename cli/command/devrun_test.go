package command

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/engine-svc/enginetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// The dev-mode tests run the built realm binary on a pseudo-terminal
// against a live engine: the terminal's modes, the keys and the signals
// are the real ones.

var realmBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// builtRealm builds ../cmd/realm once for the package's tests.
func builtRealm(t *testing.T) string {
	t.Helper()
	b := &realmBinary
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "realm-devrun-")
		if b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "realm")
		out, err := exec.Command("go", "build", "-o", b.path, "../cmd/realm").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// ptySession is one `realm workflow run` on a pseudo-terminal.
type ptySession struct {
	t    *testing.T
	tty  *os.File
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	more chan struct{} // a token after every read
	read chan struct{} // closed when the terminal has nothing more
	done chan struct{} // closed when the process has ended
	code int
}

// safety bounds every wait so that a broken command fails the test
// instead of hanging it; no assertion depends on it.
const safety = 60 * time.Second

func startSession(t *testing.T, addr string, args ...string) *ptySession {
	t.Helper()
	for i, a := range args {
		if strings.HasPrefix(a, "testdata/") {
			// The command runs in its own folder.
			abs, err := filepath.Abs(a)
			if err != nil {
				t.Fatal(err)
			}
			args[i] = abs
		}
	}
	cmd := exec.Command(builtRealm(t), append([]string{"workflow", "run"}, args...)...)
	cmd.Dir = t.TempDir() // no .env here
	cmd.Env = append(os.Environ(), "REALM_ENGINE_ADDR="+addr, "REALM_OPERATOR=dev-tester", "HOME="+t.TempDir())
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 400})
	if err != nil {
		t.Fatal(err)
	}
	s := &ptySession{t: t, tty: tty, cmd: cmd, more: make(chan struct{}, 1), read: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			s.mu.Lock()
			s.out.Write(buf[:n])
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			s.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				s.code = 128 + int(ws.Signal())
			}
		case err != nil:
			s.code = -1
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = cmd.Process.Kill()
			<-s.done
		}
		_ = tty.Close()
	})
	return s
}

// text is everything the terminal showed so far, with CR LF as LF.
func (s *ptySession) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.ReplaceAll(s.out.String(), "\r\n", "\n")
}

// waitFor waits until the terminal has shown want n times in all.
func (s *ptySession) waitFor(want string, n int) {
	s.t.Helper()
	limit := time.After(safety)
	for strings.Count(s.text(), want) < n {
		select {
		case <-s.more:
		case <-s.read:
			if strings.Count(s.text(), want) < n {
				s.t.Fatalf("the terminal closed before showing %q (%d):\n%s", want, n, s.text())
			}
		case <-limit:
			s.t.Fatalf("the terminal never showed %q (%d):\n%s", want, n, s.text())
		}
	}
}

// typeKeys types on the terminal.
func (s *ptySession) typeKeys(keys string) {
	s.t.Helper()
	if _, err := io.WriteString(s.tty, keys); err != nil {
		s.t.Fatal(err)
	}
}

// exit waits for the process to end and the terminal to drain, and
// returns the exit code and the whole transcript.
func (s *ptySession) exit() (int, string) {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(safety):
		s.t.Fatalf("realm workflow run did not end:\n%s", s.text())
	}
	select {
	case <-s.read:
	case <-time.After(safety):
		s.t.Fatalf("the terminal did not drain:\n%s", s.text())
	}
	return s.code, s.text()
}

var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// maskIDs replaces run and gate ids with <run> and <gate>.
func maskRunGate(text, runID, gateID string) string {
	if gateID != "" {
		text = strings.ReplaceAll(text, gateID, "<gate>")
	}
	if runID != "" {
		text = strings.ReplaceAll(text, runID, "<run>")
	}
	return uuidPattern.ReplaceAllString(text, "<id>")
}

// runIDIn is the id of the `Run ID:` line.
func runIDIn(t *testing.T, text string) string {
	t.Helper()
	m := regexp.MustCompile(`Run ID: (\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no Run ID line:\n%s", text)
	}
	return m[1]
}

// notRegistered is the line under the loader's report of a file run
// without --register.
func notRegistered(id string) string {
	return "Not registered: the run carries this file's definition; the registered copy of '" + id + "', if any, is unchanged (--register replaces it).\n"
}

var devrunHead = "Valid: devrun v1 (3 steps)\n" + notRegistered("devrun") + "\nRealm — Dev run v1\nRun ID: <run>\n\n"

func TestWorkflowRunAnswersTheAgentStepAndTheGate(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		s := startSession(t, l.addr, "testdata/devrun")
		s.waitFor(agentLabel, 1)
		s.typeKeys("{oops\r")
		s.waitFor(agentLabel, 2)
		s.typeKeys("[1]\r")
		s.waitFor(agentLabel, 3)
		s.typeKeys(`{"reply": 42}` + "\r")
		s.waitFor(agentLabel, 4)
		s.typeKeys(`{"reply": "Sorry."}` + "\r")
		s.waitFor("Choice [send/discard]: ", 1)
		s.typeKeys("maybe\r")
		s.waitFor("Choice [send/discard]: ", 2)
		s.typeKeys("send\r")
		code, text := s.exit()
		run := runIDIn(t, text)
		want := devrunHead +
			"→ [agent] draft: Draft the reply.\n" +
			agentLabel + "{oops\n" +
			"  ✗ Not valid JSON: invalid character 'o' looking for beginning of object key string — type one JSON object, or press Enter for {}.\n" +
			agentLabel + "[1]\n" +
			"  ✗ Not a JSON object — type one JSON object, or press Enter for {}.\n" +
			agentLabel + `{"reply": 42}` + "\n" +
			"  ✗ error: Invalid input for step 'draft'\n" +
			"    /reply must be string\n" +
			agentLabel + `{"reply": "Sorry."}` + "\n" +
			"  ✓ → running\n\n" +
			"→ [gate] approve: Approve the reply.\n" +
			"Question:\n" +
			"  {\n" +
			"    \"reply\": \"Sorry.\"\n" +
			"  }\n" +
			"  Choice [send/discard]: maybe\n" +
			"  ✗ Choice 'maybe' is not valid. Expected one of: send, discard\n" +
			"  Choice [send/discard]: send\n" +
			"  ✓ → running\n\n" +
			"→ [auto] send\n" +
			"  ✓ → completed\n\n" +
			"Run complete. Phase: completed\n"
		if got := maskRunGate(text, run, ""); code != 0 || got != want {
			t.Errorf("exit %d, transcript:\n%s\nwant exit 0 and:\n%s", code, got, want)
		}
		if st := l.state(run); st.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Errorf("run phase = %v, want completed", st.GetRunPhase())
		}
	})
}

func TestWorkflowRunCtrlDLeavesTheRunAndPrintsTheDetachMap(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		for _, key := range []struct{ name, key string }{{"Ctrl+D", "\x04"}, {"Ctrl+C", "\x03"}} {
			t.Run(key.name, func(t *testing.T) {
				s := startSession(t, l.addr, "--mint-writer-nonce", "testdata/devrun")
				s.waitFor(agentLabel, 1)
				s.typeKeys(`{"rep`)
				s.typeKeys(key.key)
				code, text := s.exit()
				run := runIDIn(t, text)
				want := devrunHead +
					"→ [agent] draft: Draft the reply.\n" +
					agentLabel + `{"rep` + "\n" +
					"Prompt cancelled — detached from run '<run>' at step 'draft' (phase: running). The run is saved.\n" +
					"  Drive it:  realm agent --run-id <run> --provider <provider> --model <model> --mint-writer-nonce\n" +
					"             If a realm workflow run or realm agent is still waiting on this run, it goes on by itself; the line above is for when none is.\n" +
					"  Inspect:   realm run inspect <run>\n" +
					"  Discard:   realm run abandon <run>\n"
				if got := maskRunGate(text, run, ""); code != 1 || got != want {
					t.Errorf("exit %d, transcript:\n%s\nwant exit 1 and:\n%s", code, got, want)
				}
				// The run is still there, waiting on its agent step.
				if st := l.state(run); st.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING || len(st.GetCompletedSteps()) != 0 {
					t.Errorf("after leaving: phase %v, completed %v; want running, none", st.GetRunPhase(), st.GetCompletedSteps())
				}
			})
		}
	})
}

func TestWorkflowRunClosesTheQuestionAnsweredElsewhere(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		s := startSession(t, l.addr, "testdata/devrun")
		s.waitFor(agentLabel, 1)
		s.typeKeys(`{"reply": "Sorry."}` + "\r")
		s.waitFor("Choice [send/discard]: ", 1)
		s.typeKeys("dis") // typed, not sent: the answer comes from elsewhere
		run := runIDIn(t, s.text())
		gate := l.state(run).GetPendingGate().GetGateId()
		if r := l.realm(nil, "run", "respond", run, "--gate", gate, "--choice", "send", "--by", "Ann Lee"); r.code != 0 {
			t.Fatalf("respond from another process: %d %s", r.code, r.stderr)
		}
		code, text := s.exit()
		want := devrunHead +
			"→ [agent] draft: Draft the reply.\n" +
			agentLabel + `{"reply": "Sorry."}` + "\n" +
			"  ✓ → running\n\n" +
			"→ [gate] approve: Approve the reply.\n" +
			"Question:\n" +
			"  {\n" +
			"    \"reply\": \"Sorry.\"\n" +
			"  }\n" +
			"  Choice [send/discard]: dis\n" +
			"  This prompt is closed: the question on 'approve' is no longer open — Answer: send · answered by Ann Lee (as stated, not verified) · proof: no claim_token passed (the CLI never passes one; over MCP, only the conversation that opened the question has one to pass).\n\n" +
			"→ [auto] send\n" +
			"  ✓ → completed\n\n" +
			"Run complete. Phase: completed\n"
		if got := maskRunGate(text, run, gate); code != 0 || got != want {
			t.Errorf("exit %d, transcript:\n%s\nwant exit 0 and:\n%s", code, got, want)
		}
	})
}

func TestWorkflowRunSignalEndsItWithoutAWordAndGivesBackTheClaim(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT} {
			t.Run(sig.String(), func(t *testing.T) {
				s := startSession(t, l.addr, "testdata/devrun")
				s.waitFor(agentLabel, 1)
				before := s.text()
				run := runIDIn(t, before)
				if st := l.state(run); len(st.GetInProgressSteps()) != 1 {
					t.Fatalf("before the signal: in progress %v, want draft claimed", st.GetInProgressSteps())
				}
				if err := s.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				code, text := s.exit()
				if code != 128+int(sig) || text != before {
					t.Errorf("after %v: exit %d, printed %q; want exit %d and nothing more", sig, code, strings.TrimPrefix(text, before), 128+int(sig))
				}
				st := l.state(run)
				if st.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING || len(st.GetInProgressSteps()) != 0 {
					t.Errorf("after %v: phase %v, in progress %v; want running with the claim given back", sig, st.GetRunPhase(), st.GetInProgressSteps())
				}
			})
		}
	})
}

func TestWorkflowRunRefusesWithoutATerminal(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		var out, errb bytes.Buffer
		code := Run(t.Context(), []string{"workflow", "run", "testdata/devrun"}, Env{
			Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("{}\n"),
			IsTerminal: func() bool { return false },
			Getenv:     func(k string) string { return map[string]string{"REALM_ENGINE_ADDR": l.addr}[k] },
		})
		want(t, result{code: code, stdout: out.String(), stderr: errb.String()}, 1, "", noTerminalLine+"\n")
		list, err := l.engine.ListRuns(l.ctx(), &realmv1.ListRunsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.GetRuns()) != 0 {
			t.Errorf("a run was created: %v", list.GetRuns())
		}
	})
}

func TestWorkflowRunCarriesOutAnExpiredQuestion(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/expiring.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "workflow.yaml")
	if err := os.WriteFile(file, bytes.ReplaceAll(b, []byte("timeout_seconds: 60"), []byte("timeout_seconds: 1")), 0o644); err != nil {
		t.Fatal(err)
	}
	eachBackend(t, func(t *testing.T, l *live) {
		s := startSession(t, l.addr, file)
		// Nothing is typed: the question's second runs out at the prompt.
		code, text := s.exit()
		run := runIDIn(t, text)
		got := regexp.MustCompile(`expired \d+s before`).ReplaceAllString(maskRunGate(text, run, ""), "expired <n>s before")
		want := "Valid: expiring v1 (2 steps)\n" + notRegistered("expiring") + "\nRealm — Expiring approval v1\nRun ID: <run>\n\n" +
			"→ [gate] approve: Approve the shipment.\n" +
			"Question: (no output)\n" +
			"  Choice [ship/hold]: \n" +
			"⏰ gate '<id>' on run '<run>' expired — enacted via the attending-process timer (enacted_via: timer).\n" +
			"  This prompt is closed: the question on 'approve' is no longer open — Answer: hold · settled by the gate's expiry (no answer in time).\n\n" +
			"→ [guard] only_if_shipping\n" +
			"  ✓ → aborted\n" +
			"  Guard step 'only_if_shipping' aborted the run.\n" +
			"  Reason: The order was held.\n\n" +
			"Run complete. Phase: aborted\n"
		if code != 1 || got != want {
			t.Errorf("exit %d, transcript:\n%s\nwant exit 1 and:\n%s", code, got, want)
		}
		// The record names the door the expiry came through.
		exp, err := l.engine.ExportRun(l.ctx(), &realmv1.ExportRunRequest{RunId: run})
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`"enacted_via":\s*"timer"`).Match(exp.GetBundle()) {
			t.Errorf("the record does not say enacted_via timer:\n%s", exp.GetBundle())
		}
	})
}

func TestWorkflowRunHoldsTheAgentStepsClaimWhileItsPromptWaits(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		s := startSession(t, l.addr, "testdata/devrun")
		s.waitFor(agentLabel, 1)
		run := runIDIn(t, s.text())
		// The record holds the claim: taken by this program, via run, with
		// no deadline.
		holder, since := claimOf(l.state(run), "draft")
		if holder != "dev-tester (from REALM_OPERATOR, via run)" || since == "an unknown time" {
			t.Errorf("step_claims: draft taken by %q since %q, want dev-tester via run", holder, since)
		}
		if r := l.realm(nil, "run", "inspect", run); !strings.Contains(r.stdout, "via run") {
			t.Errorf("inspect does not show the claim via run:\n%s%s", r.stdout, r.stderr)
		}
		if r := l.realm(nil, "run", "list", "--stuck"); !strings.Contains(r.stdout, "draft=claim_unknown_age") {
			t.Errorf("list --stuck does not show draft=claim_unknown_age:\n%s%s", r.stdout, r.stderr)
		}
		// Another driver's answer is refused while the prompt holds it.
		resp, err := l.engine.ExecuteStep(l.ctx(), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft",
			Params: mustStruct(t, map[string]any{"reply": "From elsewhere."}),
			Caller: &realmv1.Caller{By: "other-bot", BySource: "ambient", Channel: realmv1.Channel_CHANNEL_AGENT}})
		const sentence = "Step 'draft' cannot be called now: it is in flight (claimed by another call)."
		if err != nil || resp.GetReply().GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_BLOCKED || !strings.HasPrefix(resp.GetReply().GetContextHint(), sentence) {
			t.Errorf("execute_step from another driver: %v %v %q, want blocked %q", err, resp.GetReply().GetStatus(), resp.GetReply().GetContextHint(), sentence)
		}
		s.typeKeys("\x04")
		code, text := s.exit()
		want := devrunHead +
			"→ [agent] draft: Draft the reply.\n" +
			agentLabel + "\n" +
			"Prompt cancelled — detached from run '<run>' at step 'draft' (phase: running). The run is saved.\n" +
			"  Drive it:  realm agent --run-id <run> --provider <provider> --model <model>\n" +
			"             If a realm workflow run or realm agent is still waiting on this run, it goes on by itself; the line above is for when none is.\n" +
			"  Inspect:   realm run inspect <run>\n" +
			"  Discard:   realm run abandon <run>\n"
		if got := maskRunGate(text, run, ""); code != 1 || got != want {
			t.Errorf("exit %d, transcript:\n%s\nwant exit 1 and:\n%s", code, got, want)
		}
		if st := l.state(run); len(st.GetInProgressSteps()) != 0 {
			t.Errorf("after Ctrl+D the claim is still held: in progress %v", st.GetInProgressSteps())
		}
	})
}

func TestWorkflowRunClosesTheAgentPromptWhenItsClaimIsRemoved(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		s := startSession(t, l.addr, "testdata/devrun")
		s.waitFor(agentLabel, 1)
		run := runIDIn(t, s.text())
		if r := l.realm(nil, "run", "reclaim", run, "--step", "draft", "--force"); r.code != 0 {
			t.Fatalf("reclaim from another process: %d %s%s", r.code, r.stdout, r.stderr)
		}
		// The prompt closes, and the step is claimed and asked for again.
		s.waitFor(agentLabel, 2)
		s.typeKeys(`{"reply": "Sorry."}` + "\r")
		s.waitFor("Choice [send/discard]: ", 1)
		s.typeKeys("\x04")
		code, text := s.exit()
		gate := l.state(run).GetPendingGate().GetGateId()
		want := devrunHead +
			"→ [agent] draft: Draft the reply.\n" +
			agentLabel + "\n" +
			"  This prompt is closed: the claim it held on step 'draft' was removed by another process, and the step has not run.\n\n" +
			"→ [agent] draft: Draft the reply.\n" +
			agentLabel + `{"reply": "Sorry."}` + "\n" +
			"  ✓ → running\n\n" +
			"→ [gate] approve: Approve the reply.\n" +
			"Question:\n" +
			"  {\n" +
			"    \"reply\": \"Sorry.\"\n" +
			"  }\n" +
			"  Choice [send/discard]: \n" +
			"Prompt cancelled — detached from run '<run>' at step 'approve' (phase: gate_waiting). The run is saved.\n" +
			"  Respond:   realm run respond <run> --gate <gate> --choice <one of: send, discard>\n" +
			"  Inspect:   realm run inspect <run>\n"
		if got := maskRunGate(text, run, gate); code != 1 || got != want {
			t.Errorf("exit %d, transcript:\n%s\nwant exit 1 and:\n%s", code, got, want)
		}
	})
}

func TestWorkflowRunClosesTheAgentPromptOfAStepDoneElsewhere(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		s := startSession(t, l.addr, "testdata/devrun")
		s.waitFor(agentLabel, 1)
		run := runIDIn(t, s.text())
		// Another driver answers the step while the prompt waits. The
		// prompt holds the claim, so only its token answers: the other
		// driver reads it from the exported record, secrets included (as
		// an operator's tool that copies it could).
		exp, err := l.engine.ExportRun(l.ctx(), &realmv1.ExportRunRequest{RunId: run, WithSecrets: true})
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?s)"claims":\s*\{\s*"draft":.*?"token":\s*"([^"]+)"`).FindSubmatch(exp.GetBundle())
		if m == nil {
			t.Fatalf("no claim on draft in the record:\n%s", exp.GetBundle())
		}
		token := string(m[1])
		resp, err := l.engine.ExecuteStep(l.ctx(), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft", ClaimToken: &token,
			Params: mustStruct(t, map[string]any{"reply": "From elsewhere."}),
			Caller: &realmv1.Caller{By: "other-bot", BySource: "ambient", Channel: realmv1.Channel_CHANNEL_AGENT}})
		if err != nil || !succeeded(resp.GetReply()) {
			t.Fatalf("execute_step from another driver: %v %v %s", err, resp.GetReply().GetStatus(), resp.GetReply().GetContextHint())
		}
		s.waitFor("Choice [send/discard]: ", 1)
		s.typeKeys("\x04")
		code, text := s.exit()
		gate := l.state(run).GetPendingGate().GetGateId()
		want := devrunHead +
			"→ [agent] draft: Draft the reply.\n" +
			agentLabel + "\n" +
			"  This prompt is closed: step 'draft' was taken by other-bot (from REALM_OPERATOR, via agent), and completed; not run here.\n\n" +
			"→ [gate] approve: Approve the reply.\n" +
			"Question:\n" +
			"  {\n" +
			"    \"reply\": \"From elsewhere.\"\n" +
			"  }\n" +
			"  Choice [send/discard]: \n" +
			"Prompt cancelled — detached from run '<run>' at step 'approve' (phase: gate_waiting). The run is saved.\n" +
			"  Respond:   realm run respond <run> --gate <gate> --choice <one of: send, discard>\n" +
			"  Inspect:   realm run inspect <run>\n"
		if got := maskRunGate(text, run, gate); code != 1 || got != want {
			t.Errorf("exit %d, transcript:\n%s\nwant exit 1 and:\n%s", code, got, want)
		}
	})
}

func TestWorkflowRunStopsWhenNothingCanRun(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "workflow.yaml")
	yaml := "id: stalling\nname: Stalling\nversion: 1\nsteps:\n" +
		"  note:\n    description: Write a note.\n    execution: agent\n    preconditions: ['run.params.ok == true']\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	eachBackend(t, func(t *testing.T, l *live) {
		// A precondition reads no run params: it fails, and nothing else
		// can run.
		s := startSession(t, l.addr, "--params", `{"ok": true}`, file)
		code, text := s.exit()
		run := runIDIn(t, text)
		want := "Valid: stalling v1 (1 step)\n" + notRegistered("stalling") + "\nRealm — Stalling v1\nRun ID: <run>\n\n" +
			"Workflow stalled: nothing else can run.\n" +
			"'note' cannot run (precondition): Precondition failed: 'run.params.ok == true'. Resolved value: null.\n" +
			"Run <run> stays open (phase 'running'): correct the workflow, register it again, then realm run advance <run> — or end it: realm run abandon <run>\n"
		if got := maskRunGate(text, run, ""); code != 1 || got != want {
			t.Errorf("exit %d, transcript:\n%s\nwant exit 1 and:\n%s", code, got, want)
		}
	})
}

func TestWorkflowRunRefusesBeforeAnyCall(t *testing.T) {
	t.Parallel()
	// Nothing listens here: a command that called the engine would end
	// with exit 2 (unreachable), not with its one line.
	cases := []struct {
		name     string
		terminal bool
		env      map[string]string
		args     []string
		stderr   string
	}{
		{"no terminal", false, nil, nil, noTerminalLine},
		{"bad REALM_OPERATOR, even without a terminal", false, map[string]string{"REALM_OPERATOR": "ops\tbot"}, nil,
			"REALM_OPERATOR: contains a control character; nothing was done. Give a name of at most 200 characters with no control characters, or unset it."},
		{"params not an object", true, nil, []string{"--params", "[1]"}, "Error: --params must be a JSON object: json: cannot unmarshal array into Go value of type map[string]interface {}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{"REALM_ENGINE_ADDR": "127.0.0.1:1"}
			for k, v := range c.env {
				vars[k] = v
			}
			var out, errb bytes.Buffer
			code := Run(t.Context(), append(append([]string{"workflow", "run"}, c.args...), "testdata/devrun"), Env{
				Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""),
				IsTerminal: func() bool { return c.terminal },
				Getenv:     func(k string) string { return vars[k] },
			})
			want(t, result{code: code, stdout: out.String(), stderr: errb.String()}, 1, "", c.stderr+"\n")
		})
	}
}

func TestWorkflowRunKilledLeavesTheClaimForReclaim(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		s := startSession(t, l.addr, "testdata/devrun")
		s.waitFor(agentLabel, 1)
		run := runIDIn(t, s.text())
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		s.exit()
		if st := l.state(run); len(st.GetInProgressSteps()) != 1 {
			t.Fatalf("after SIGKILL: in progress %v, want the claim left on draft", st.GetInProgressSteps())
		}
		if r := l.realm(nil, "run", "reclaim", run, "--step", "draft", "--force"); r.code != 0 || !strings.Contains(r.stdout, "Reclaimed 'draft' (was claim_unknown_age).") {
			t.Errorf("reclaim: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if st := l.state(run); len(st.GetInProgressSteps()) != 0 {
			t.Errorf("after reclaim: in progress %v, want none", st.GetInProgressSteps())
		}
	})
}

// fileRunV2 is a changed copy of the registered filerun v1 (step 'answer'):
// version 2, and its one step is 'reply'.
const fileRunV2 = "id: filerun\nname: File run\nversion: 2\nsteps:\n  reply:\n    description: Write the reply.\n    execution: agent\n"

// `realm workflow run <path>` leaves the registered copy of the file's id
// as it was unless --register is given; either way the run follows the
// file's steps.
func TestWorkflowRunRegistersOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "workflow.yaml")
	if err := os.WriteFile(file, []byte(fileRunV2), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		head       string
		registered string
	}{
		{"without register", nil, "Valid: filerun v2 (1 step)\n" + notRegistered("filerun"), "answer"},
		{"with register", []string{"--register"}, "Registered: filerun v2 (1 step)\n", "reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := enginetest.Start(t, "miniredis")
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			l := &live{t: t, addr: addr, realm: runner(addr), engine: realmv1.NewEngineServiceClient(conn)}
			v1 := "id: filerun\nname: File run\nversion: 1\nsteps:\n  answer:\n    description: Answer.\n    execution: agent\n"
			if r, err := l.engine.RegisterWorkflow(l.ctx(), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(v1), Path: "v1.yaml"}}); err != nil || !r.GetRegistered() {
				t.Fatalf("register v1: %v %v", r, err)
			}
			s := startSession(t, addr, append(append([]string{}, tc.args...), file)...)
			s.waitFor(agentLabel, 1)
			s.typeKeys("{}\r")
			code, text := s.exit()
			run := runIDIn(t, text)
			want := tc.head + "\nRealm — File run v2\nRun ID: <run>\n\n→ [agent] reply: Write the reply.\n" + agentLabel + "{}\n  ✓ → completed\n\nRun complete. Phase: completed\n"
			if got := maskRunGate(text, run, ""); code != 0 || got != want {
				t.Errorf("exit %d, transcript:\n%s\nwant exit 0 and:\n%s", code, got, want)
			}
			p, err := l.engine.GetWorkflowProtocol(l.ctx(), &realmv1.GetWorkflowProtocolRequest{WorkflowId: "filerun"})
			if err != nil {
				t.Fatal(err)
			}
			steps, _ := p.GetProtocol().AsMap()["steps"].([]any)
			if len(steps) != 1 || steps[0].(map[string]any)["id"] != tc.registered {
				t.Errorf("registered copy's steps = %v, want [%s]", steps, tc.registered)
			}
		})
	}
}
