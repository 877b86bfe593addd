package command

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/engine-svc/enginetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// live is a real engine (enginetest) for the acting commands: the realm
// command lines run against it, and a plain client sets runs up.
type live struct {
	t      *testing.T
	addr   string
	realm  func(env map[string]string, args ...string) result
	engine realmv1.EngineServiceClient
}

// eachBackend runs f in parallel against a fresh engine over every store.
func eachBackend(t *testing.T, f func(t *testing.T, l *live)) {
	t.Helper()
	for _, backend := range enginetest.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			addr := enginetest.Start(t, backend)
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			f(t, &live{t: t, addr: addr, realm: runner(addr), engine: realmv1.NewEngineServiceClient(conn)})
		})
	}
}

func (l *live) ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	l.t.Cleanup(cancel)
	return c
}

// register registers testdata/<name>.yaml, with edits applied (old, new pairs).
func (l *live) register(name string, edits ...string) {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		l.t.Fatal(err)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		b = bytes.ReplaceAll(b, []byte(edits[i]), []byte(edits[i+1]))
	}
	resp, err := l.engine.RegisterWorkflow(l.ctx(), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: b, Path: "workflow.yaml"}})
	if err != nil {
		l.t.Fatal(err)
	}
	if !resp.GetRegistered() {
		l.t.Fatalf("%s was not registered: %v", name, resp.GetReport().GetErrors())
	}
}

// start starts a run and returns the engine's reply.
func (l *live) start(workflowID string, params map[string]any) *realmv1.Reply {
	l.t.Helper()
	p, err := structpb.NewStruct(params)
	if err != nil {
		l.t.Fatal(err)
	}
	resp, err := l.engine.StartRun(l.ctx(), &realmv1.StartRunRequest{WorkflowId: workflowID, Params: p, Caller: &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_RUN}})
	if err != nil {
		l.t.Fatal(err)
	}
	if resp.GetReply().GetRunId() == "" {
		l.t.Fatalf("start_run %s refused: %v", workflowID, resp.GetReply().GetErrors())
	}
	return resp.GetReply()
}

// gated starts a run of a workflow whose first step opens a gate and
// returns the run and gate ids.
func (l *live) gated(workflowID string) (runID, gateID string) {
	l.t.Helper()
	r := l.start(workflowID, map[string]any{"order": "A1"})
	if r.GetGate().GetGateId() == "" {
		l.t.Fatalf("start_run %s opened no gate: %s", workflowID, r.GetContextHint())
	}
	return r.GetRunId(), r.GetGate().GetGateId()
}

// supportAtGate starts a support run and drafts the reply, which opens the
// draft step's gate.
func (l *live) supportAtGate() (runID, gateID string) {
	l.t.Helper()
	runID = l.start("support", map[string]any{"ticket": "T-1"}).GetRunId()
	resp, err := l.engine.ExecuteStep(l.ctx(), &realmv1.ExecuteStepRequest{RunId: runID, Command: "draft", Params: mustStruct(l.t, map[string]any{"reply": "Sorry."}), Caller: &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_RUN}})
	if err != nil {
		l.t.Fatal(err)
	}
	if resp.GetReply().GetGate().GetGateId() == "" {
		l.t.Fatalf("drafting opened no gate: %v", resp.GetReply().GetErrors())
	}
	return runID, resp.GetReply().GetGate().GetGateId()
}

func (l *live) state(runID string) *realmv1.RunState {
	l.t.Helper()
	resp, err := l.engine.GetRunState(l.ctx(), &realmv1.GetRunStateRequest{RunId: runID})
	if err != nil {
		l.t.Fatal(err)
	}
	if resp.GetState() == nil {
		l.t.Fatalf("no state for %s: %v", runID, resp.GetRefusal().GetErrors())
	}
	return resp.GetState()
}

// want checks a command's exit code and its whole stdout and stderr.
func want(t *testing.T, got result, code int, stdout, stderr string) {
	t.Helper()
	if got.code != code {
		t.Errorf("exit code = %d, want %d (stdout %q, stderr %q)", got.code, code, got.stdout, got.stderr)
	}
	if got.stdout != stdout {
		t.Errorf("stdout =\n%s\nwant\n%s", got.stdout, stdout)
	}
	if got.stderr != stderr {
		t.Errorf("stderr =\n%s\nwant\n%s", got.stderr, stderr)
	}
}

func lines(ls ...string) string {
	if len(ls) == 0 {
		return ""
	}
	return strings.Join(ls, "\n") + "\n"
}

func TestRunRespondRecordsTheAnswerAndNamesTheOwedStep(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("support")
		run, gate := l.supportAtGate()
		responded := lines(
			fmt.Sprintf("Responded: %s | choice 'send' | new state 'running'", run),
			fmt.Sprintf("Owed to the engine: 'send' — realm run advance %s runs it from this shell.", run),
		)
		want(t, l.realm(nil, "run", "respond", run, "--gate", gate, "--choice", "send", "--by", "Ann Lee"), 0, responded, "")
		if s := l.state(run); !slices.Contains(s.GetCompletedSteps(), "draft") || s.GetPendingGate() != nil {
			t.Errorf("after respond: completed %v, pending gate %v; want draft completed and no gate", s.GetCompletedSteps(), s.GetPendingGate())
		}
		// The same answer again changes nothing and says so the same way.
		want(t, l.realm(nil, "run", "respond", run, "--gate", gate, "--choice", "send"), 0, responded, "")
	})
}

func TestRunRespondPrintsTheGuardsTheAnswerDecided(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("shipping")
		held, heldGate := l.gated("shipping")
		want(t, l.realm(nil, "run", "respond", held, "--gate", heldGate, "--choice", "hold"), 0, lines(
			"Guard step 'only_if_shipping' aborted the run.",
			"Reason: The order was held.",
			fmt.Sprintf("Responded: %s | choice 'hold' | new state 'aborted'", held),
		), "")

		shipped, shipGate := l.gated("shipping")
		want(t, l.realm(nil, "run", "respond", shipped, "--gate", shipGate, "--choice", "ship"), 0, lines(
			"Guard step 'only_if_shipping' passed.",
			fmt.Sprintf("Responded: %s | choice 'ship' | new state 'running'", shipped),
			fmt.Sprintf("Owed to the engine: 'ship' — realm run advance %s runs it from this shell.", shipped),
		), "")
	})
}

func TestRunRespondRefusals(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("shipping")
		run, gate := l.gated("shipping")
		aborted, abortedGate := l.gated("shipping")
		if r := l.realm(nil, "run", "respond", aborted, "--gate", abortedGate, "--choice", "hold"); r.code != 0 {
			t.Fatalf("setup: hold refused: %s", r.stderr)
		}
		answered, answeredGate := l.gated("shipping")
		if r := l.realm(nil, "run", "respond", answered, "--gate", answeredGate, "--choice", "ship"); r.code != 0 {
			t.Fatalf("setup: ship refused: %s", r.stderr)
		}
		cases := []struct {
			name   string
			args   []string
			stderr string
		}{
			{"wrong gate", []string{run, "--gate", "g-nope", "--choice", "ship"},
				"Gate 'g-nope' is not the open gate and matches no committed resolution."},
			{"invalid choice", []string{run, "--gate", gate, "--choice", "maybe"},
				"Choice 'maybe' is not valid. Expected one of: ship, hold"},
			{"answered differently", []string{answered, "--gate", answeredGate, "--choice", "hold"},
				fmt.Sprintf("Gate '%s' was already resolved with choice 'ship' — your choice 'hold' was not recorded.", answeredGate)},
			{"run ended", []string{aborted, "--gate", "g-other", "--choice", "ship"},
				fmt.Sprintf("Run '%s' is terminal (aborted); cannot submit a gate response — an aborted run is never resumed; 'realm run purge %s' previews what it would remove.", aborted, aborted)},
			{"no such run", []string{"r-missing", "--gate", gate, "--choice", "ship"},
				"Run not found: r-missing"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				want(t, l.realm(nil, append([]string{"run", "respond"}, c.args...)...), 1, "", c.stderr+"\n")
			})
		}
		// None of the refusals touched the open gate.
		if g := l.state(run).GetPendingGate(); g.GetGateId() != gate {
			t.Errorf("pending gate after refusals = %v, want %s still open", g, gate)
		}
	})
}

func TestRunRespondChecksNamesBeforeAnyCall(t *testing.T) {
	t.Parallel()
	// Nothing listens here: a command that called the engine would end
	// with exit 2 (unreachable), not with the name's one line.
	dead := runner("127.0.0.1:1")
	const tail = "; nothing was recorded. Give a name of at most 200 characters with no control characters, or leave it out."
	cases := []struct {
		name   string
		env    map[string]string
		by     []string
		stderr string
	}{
		{"empty --by", nil, []string{"--by", "  "}, "--by: empty" + tail},
		{"long --by", nil, []string{"--by", strings.Repeat("x", 201)}, "--by: longer than 200 characters" + tail},
		{"control character in --by", nil, []string{"--by", "Ann\x07"}, "--by: contains a control character" + tail},
		{"bad REALM_OPERATOR", map[string]string{"REALM_OPERATOR": "ops\tbot"}, nil,
			"REALM_OPERATOR: contains a control character, so nothing was recorded. Unset it or give it a name of at most 200 characters with no control characters."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "respond", "r-1", "--gate", "g-1", "--choice", "ship"}, c.by...)
			want(t, dead(c.env, args...), 1, "", c.stderr+"\n")
		})
	}
}

// respondFake answers SubmitHumanResponse with a canned reply and keeps
// the request.
type respondFake struct {
	realmv1.UnimplementedEngineServiceServer
	got chan *realmv1.SubmitHumanResponseRequest
}

func (f *respondFake) SubmitHumanResponse(_ context.Context, r *realmv1.SubmitHumanResponseRequest) (*realmv1.SubmitHumanResponseResponse, error) {
	f.got <- r
	return &realmv1.SubmitHumanResponseResponse{Reply: &realmv1.Reply{
		RunId: r.GetRunId(), Status: realmv1.ReplyStatus_REPLY_STATUS_OK, RunPhase: realmv1.RunPhase_RUN_PHASE_RUNNING,
	}}, nil
}

func TestRunRespondSendsTheAnswererAndTheCaller(t *testing.T) {
	t.Parallel()
	f := &respondFake{got: make(chan *realmv1.SubmitHumanResponseRequest, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	realmv1.RegisterEngineServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	by := strings.Repeat("é", 200) // 200 characters, 400 bytes: accepted
	r := runner(lis.Addr().String())(map[string]string{"REALM_OPERATOR": "ops-bot"}, "run", "respond", "r-1", "--gate", "g-1", "--choice", "ship", "--by", by)
	want(t, r, 0, lines("Responded: r-1 | choice 'ship' | new state 'running'", "To end the run instead: realm run abandon r-1."), "")
	got := <-f.got
	if got.GetRunId() != "r-1" || got.GetGateId() != "g-1" || got.GetChoice() != "ship" || got.GetRespondedBy() != by || got.ClaimToken != nil {
		t.Errorf("request = %v", got)
	}
	// REALM_OPERATOR names the program, never the answerer.
	if c := got.GetCaller(); c.GetBy() != "ops-bot" || c.GetBySource() != "ambient" || c.GetChannel() != realmv1.Channel_CHANNEL_RUN {
		t.Errorf("caller = %v, want ops-bot, ambient, CHANNEL_RUN", c)
	}
}

func TestRunRespondAfterTheGateExpired(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("expiring", "timeout_seconds: 60", "timeout_seconds: 1")
		same, sameGate := l.gated("expiring")
		other, otherGate := l.gated("expiring")
		advanced, advancedGate := l.gated("expiring")
		time.Sleep(1100 * time.Millisecond) // the gates' one second runs out

		got := l.realm(nil, "run", "respond", same, "--gate", sameGate, "--choice", "hold")
		expiry := regexp.QuoteMeta(fmt.Sprintf("⚠ gate '%s' on 'approve' had expired ", sameGate)) + `\d+s` +
			regexp.QuoteMeta(" before this call — this respond call first carried out its declared settle_default: the default choice 'hold' was recorded (enacted_via: respond).")
		wantOut := regexp.MustCompile("^" + expiry + "\n" + regexp.QuoteMeta(lines(
			"⚠ No claim_token was passed.",
			"the outcome matches your choice, but it was settled by timeout; your response was not recorded.",
			"Guard step 'only_if_shipping' aborted the run.",
			"Reason: The order was held.",
			fmt.Sprintf("Not recorded: %s | gate settled by timeout with choice 'hold' | state 'aborted'", same),
		)) + "$")
		if got.code != 0 || !wantOut.MatchString(got.stdout) || got.stderr != "" {
			t.Errorf("matching late answer: code %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
		}

		got = l.realm(nil, "run", "respond", other, "--gate", otherGate, "--choice", "ship")
		expiry = strings.ReplaceAll(expiry, regexp.QuoteMeta(sameGate), regexp.QuoteMeta(otherGate))
		wantErr := regexp.MustCompile("^" + expiry + "\n" + regexp.QuoteMeta(lines(
			fmt.Sprintf("Gate '%s' was settled by timeout with choice 'hold' — your choice 'ship' was not recorded.", otherGate),
			"Guard step 'only_if_shipping' aborted the run.",
			"Reason: The order was held.",
			fmt.Sprintf("Not recorded: %s | gate settled by timeout with choice 'hold' | state 'aborted'", other),
		)) + "$")
		if got.code != 1 || got.stdout != "" || !wantErr.MatchString(got.stderr) {
			t.Errorf("different late answer: code %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
		}

		// advance carries the expiry out and decides the guard it made ready.
		got = l.realm(nil, "run", "advance", advanced)
		out := strings.Split(got.stdout, "\n")
		if got.code != 0 || len(out) != 9 || got.stderr != "" {
			t.Fatalf("advance of an expired gate: code %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
		}
		if w := out[3]; !strings.HasPrefix(w, fmt.Sprintf("⚠ gate '%s' on 'approve' had expired ", advancedGate)) ||
			!strings.HasSuffix(w, "declared settle_default: the default choice 'hold' was recorded (enacted_via: advance).") || !strings.Contains(w, "this advance call") {
			t.Errorf("expiry line = %q", w)
		}
		out[3] = "⚠ …"
		if rest := strings.Join(out, "\n"); rest != lines(
			fmt.Sprintf("Advancing run %s (workflow 'expiring').", advanced),
			"Owed to the engine: 'approve'.",
			"→ only_if_shipping",
			"⚠ …",
			"Guard step 'only_if_shipping' aborted the run.",
			"Reason: The order was held.",
			"Stopped: the run has ended (aborted)",
			fmt.Sprintf("Run %s: phase 'aborted'", advanced),
		) {
			t.Errorf("advance of an expired gate printed\n%s", got.stdout)
		}
	})
}

func TestRunAdvance(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("support")
		l.register("shipping")

		// An owed auto step runs and completes the run.
		run, gate := l.supportAtGate()
		if r := l.realm(nil, "run", "respond", run, "--gate", gate, "--choice", "send"); r.code != 0 {
			t.Fatalf("setup: respond refused: %s", r.stderr)
		}
		want(t, l.realm(nil, "run", "advance", run), 0, lines(
			fmt.Sprintf("Advancing run %s (workflow 'support').", run),
			"Owed to the engine: 'send'.",
			"→ send",
			fmt.Sprintf("Run %s: phase 'completed'", run),
		), "")
		if s := l.state(run); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || !slices.Contains(s.GetCompletedSteps(), "send") {
			t.Errorf("after advance: phase %v, completed %v", s.GetRunPhase(), s.GetCompletedSteps())
		}
		// Advancing it again finds it ended.
		want(t, l.realm(nil, "run", "advance", run), 0, lines(
			fmt.Sprintf("Advancing run %s (workflow 'support').", run),
			"Stopped: the run has ended (completed)",
			fmt.Sprintf("Run %s: phase 'completed'", run),
		), "")

		// A run whose next step is the agent's: nothing for the engine.
		fresh := l.start("support", map[string]any{}).GetRunId()
		want(t, l.realm(nil, "run", "advance", fresh), 0, lines(
			fmt.Sprintf("Advancing run %s (workflow 'support').", fresh),
			fmt.Sprintf("Stopped: an agent step is ready: 'draft' — drive it with realm agent --run-id %s", fresh),
			fmt.Sprintf("Run %s: phase 'running'", fresh),
		), "")

		// A run waiting on a question: the respond command to answer it.
		waiting, waitingGate := l.gated("shipping")
		want(t, l.realm(nil, "run", "advance", waiting), 0, lines(
			fmt.Sprintf("Advancing run %s (workflow 'shipping').", waiting),
			fmt.Sprintf("Stopped: a question is open at 'approve' — answer it: realm run respond %s --gate %s --choice <one of: ship, hold>", waiting, waitingGate),
			fmt.Sprintf("Run %s: phase 'gate_waiting'", waiting),
		), "")

		want(t, l.realm(nil, "run", "advance", "r-missing"), 1, "", "Run not found: r-missing\n")
	})
}

func TestRunAdvanceStopsAtAQuestionItOpened(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, l *live) {
		// support, with a question before the reply is sent.
		l.register("support", "id: support", "id: support_checked",
			"    when: \"draft.choice == 'send'\"", "    when: \"draft.choice == 'send'\"\n    trust: human_confirmed\n    gate:\n      choices: [go, stop]")
		run := l.start("support_checked", map[string]any{}).GetRunId()
		resp, err := l.engine.ExecuteStep(l.ctx(), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft", Params: mustStruct(t, map[string]any{"reply": "Sorry."})})
		if err != nil || resp.GetReply().GetGate() == nil {
			t.Fatalf("setup: draft: %v %v", err, resp.GetReply().GetErrors())
		}
		if r := l.realm(nil, "run", "respond", run, "--gate", resp.GetReply().GetGate().GetGateId(), "--choice", "send"); r.code != 0 {
			t.Fatalf("setup: respond refused: %s", r.stderr)
		}
		got := l.realm(nil, "run", "advance", run)
		gate := l.state(run).GetPendingGate()
		if gate.GetStepName() != "send" {
			t.Fatalf("after advance: pending gate %v, want one on 'send'", gate)
		}
		want(t, got, 0, lines(
			fmt.Sprintf("Advancing run %s (workflow 'support_checked').", run),
			"Owed to the engine: 'send'.",
			fmt.Sprintf("Stopped: a question opened at 'send' — answer it: realm run respond %s --gate %s --choice <one of: go, stop>", run, gate.GetGateId()),
			fmt.Sprintf("Run %s: phase 'gate_waiting'", run),
		), "")
	})
}

func TestRunAdvanceRefusesABadOperatorNameBeforeAnyCall(t *testing.T) {
	t.Parallel()
	r := runner("127.0.0.1:1")(map[string]string{"REALM_OPERATOR": strings.Repeat("x", 201)}, "run", "advance", "r-1")
	want(t, r, 1, "", "REALM_OPERATOR: longer than 200 characters; nothing was done. Give a name of at most 200 characters with no control characters, or unset it.\n")
}

func TestRunAbandon(t *testing.T) {
	t.Parallel()
	const kill = "abandon is a kill — declared finalizers (if any) did NOT run and will not for this run. The graceful path is the workflow's own guard step (abort_unless), which runs them; there is no operator abort command."
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("support")
		l.register("shipping")

		run := l.start("support", map[string]any{"ticket": "T-1", "note": "it's <late>"}).GetRunId()
		again := fmt.Sprintf(`To run the same work again: realm run start support --params '{"note":"it'\''s <late>","ticket":"T-1"}' — a fresh run; this run's evidence stays at realm run inspect %s.`, run)
		want(t, l.realm(nil, "run", "abandon", run), 0, lines(
			fmt.Sprintf("Run '%s' abandoned (phase: 'abandoned'). Reason: Abandoned via realm run abandon.", run),
			again,
			kill,
		), "")
		if s := l.state(run); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABANDONED || s.GetTerminalReason() != "Abandoned via realm run abandon" {
			t.Errorf("after abandon: phase %v, terminal_reason %q", s.GetRunPhase(), s.GetTerminalReason())
		}
		// Again: still a success, and it says nothing changed.
		want(t, l.realm(nil, "run", "abandon", run, "--reason", "another reason"), 0, lines(
			fmt.Sprintf("Run '%s' abandoned (phase: 'abandoned'). Reason: Abandoned via realm run abandon. Already abandoned (no change this call).", run),
			again,
			kill,
		), "")

		reasoned := l.start("support", map[string]any{}).GetRunId()
		want(t, l.realm(nil, "run", "abandon", reasoned, "--reason", "Customer withdrew"), 0, lines(
			fmt.Sprintf("Run '%s' abandoned (phase: 'abandoned'). Reason: Customer withdrew.", reasoned),
			fmt.Sprintf("To run the same work again: realm run start support --params '{}' — a fresh run; this run's evidence stays at realm run inspect %s.", reasoned),
			kill,
		), "")

		waiting, gate := l.gated("shipping")
		want(t, l.realm(nil, "run", "abandon", waiting), 1, "",
			fmt.Sprintf("Run '%s' is waiting on human gate 'approve' (gate '%s'); answer it before abandoning. Answer it: realm run respond %s --gate %s --choice <one of: ship, hold>.\n", waiting, gate, waiting, gate))
		if s := l.state(waiting); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING {
			t.Errorf("refused abandon changed the run: phase %v", s.GetRunPhase())
		}

		done, doneGate := l.supportAtGate()
		l.realm(nil, "run", "respond", done, "--gate", doneGate, "--choice", "send")
		l.realm(nil, "run", "advance", done)
		want(t, l.realm(nil, "run", "abandon", done), 1, "",
			fmt.Sprintf("Run '%s' is already terminal (completed); cannot abandon a finished run.\n", done))

		want(t, l.realm(nil, "run", "abandon", "r-missing"), 1, "", "Run not found: r-missing\n")
	})
}
