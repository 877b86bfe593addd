package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
	"github.com/realm-go/realm/pkg/source"
)

// noTerminalLine is cli.md §2.6's refusal when stdin is not a terminal.
const noTerminalLine = "Error: dev-mode run is interactive — it prompts on stdin for every step and gate, and stdin here is not a terminal. " +
	"No run was created. Scripted flows: 'realm workflow test' drives fixtures; 'realm listen' / 'realm agent' are the production drives. " +
	"To run this workflow by hand, use a real terminal."

// inFlightWait is how long an unchanged run with a step in flight
// elsewhere is waited for (cli.md §2.6).
const inFlightWait = 60 * time.Second

// requireNonceEnv makes every agent answer carry a writer nonce (cli.md §8).
const requireNonceEnv = "REALM_REQUIRE_WRITER_NONCE"

// devFlags are `realm workflow run`'s flags.
type devFlags struct {
	params, extensionsModule, project string
	mintWriterNonce, register         bool
}

func (a *app) workflowRunCommand() *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "run <path>",
		Short: "Run a workflow by hand in a terminal, typing each agent answer and gate choice (dev mode)",
		Long: "Start a run of the workflow file (or the folder holding workflow.yaml) and drive it from this\n" +
			"terminal. The file is checked as register checks it but NOT registered: the run carries the file's\n" +
			"definition (stored with the run, so every engine replica and every later command — realm run\n" +
			"respond/advance, realm agent --run-id — decides its steps by it), and the registered copy of its id,\n" +
			"if any, is neither read nor changed. With --register the file is registered first, replacing the\n" +
			"stored copy of its id as realm workflow register does, and the run follows the registered copy\n" +
			"(re-registering it later changes the run's remaining steps).\n\n" +
			"The engine runs the auto and guard steps; each agent step asks for\n" +
			"its answer as one JSON object (Enter for {}), asked again when its schema refuses it; each open\n" +
			"question asks for a choice. While a prompt waits, the run is read twice a second: when another\n" +
			"process settles the question or does the step, the prompt closes, says what the record holds,\n" +
			"and the run goes on.\n\n" +
			"While an agent step's prompt waits, this command holds the step's claim (inspect shows it taken\n" +
			"via run; realm agent waits; another execute_step is refused). The claim has no deadline (list\n" +
			"--stuck shows <step>=claim_unknown_age). The engine takes it over for the answer typed here; it is\n" +
			"given back when the prompt is left or on SIGHUP/SIGINT/SIGTERM. After SIGKILL it stays: recover\n" +
			"with realm run reclaim <run> --step <step> --force. When a question's time runs out at its prompt,\n" +
			"this command carries out its on_expiry (enacted_via: timer).\n\n" +
			"Ctrl+D or Ctrl+C at a prompt leaves the run as it is and prints how to carry on. Needs a terminal\n" +
			"on stdin. Exit 0 only when the run completed; 1 when it ended any other way, stalled, or the prompt\n" +
			"was left; 128+N when ended by signal N; 2 when engine-svc cannot be reached.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.devRun(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.params, "params", "", "the run's parameters, a JSON object (default {})")
	fl.StringVar(&f.extensionsModule, "extensions-module", "", "repeated in the printed realm agent command; this build loads no project code (handlers run on registered runners)")
	fl.StringVar(&f.project, "project", "", "repeated in the printed realm agent command; this build reads no realm.yaml")
	fl.BoolVar(&f.mintWriterNonce, "mint-writer-nonce", false, "send a fresh writer nonce with every agent answer")
	fl.BoolVar(&f.register, "register", false, "register the file first, replacing the stored copy of its id; without it the run carries the file's definition and nothing is registered")
	return cmd
}

// signalled is why a `workflow run` was cut short by a signal.
type signalled struct{ sig syscall.Signal }

func (s signalled) Error() string { return "signal " + s.sig.String() }

// devRun is `realm workflow run` (cli.md §2.6).
func (a *app) devRun(ctx context.Context, path string, f devFlags) error {
	caller, err := a.caller()
	if err != nil {
		return err
	}
	if !a.env.IsTerminal() {
		return &exitError{code: ExitRefused, msg: noTerminalLine}
	}
	params, err := parseParams(f.params)
	if err != nil {
		return err
	}
	src, err := source.Read(path)
	if err != nil {
		return a.unreadable(path, false, false, err)
	}
	a.noSpinner = true
	eng, closeConn, err := a.engine(ctx)
	if err != nil {
		return err
	}
	defer closeConn()

	// Only a signal ends this command early, and its code says which
	// (128+N); the caller's own cancellation is not a reason to stop.
	sctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			if n, ok := s.(syscall.Signal); ok {
				cancel(signalled{sig: n})
			}
		case <-sctx.Done():
		}
	}()

	if in, ok := a.env.Stdin.(*os.File); ok && isTerminal(in) {
		restore, err := keysMode(int(in.Fd()))
		if err == nil {
			defer restore()
		}
	}
	env := strings.TrimSpace(a.env.Getenv(requireNonceEnv))
	d := &devRun{
		a: a, ctx: sctx, eng: eng, caller: caller, flags: f,
		kb:    newKeyboard(a.env.Stdin),
		out:   a.env.Stdout,
		errw:  a.env.Stderr,
		nonce: f.mintWriterNonce || env != "" && env != "0" && !strings.EqualFold(env, "false"),
	}
	err = d.run(src, params)
	var s signalled
	if errors.As(context.Cause(sctx), &s) {
		// A signal ends it at once, printing nothing (cli.md §2.6).
		return &exitError{code: 128 + int(s.sig)}
	}
	return err
}

// devRun is one `workflow run` session against one run.
type devRun struct {
	a         *app
	ctx       context.Context
	eng       realmv1.EngineServiceClient
	caller    *realmv1.Caller
	flags     devFlags
	kb        *keyboard
	out, errw io.Writer
	nonce     bool

	runID string
	steps map[string]stepInfo
	// last is the step that finished last, for the failing-step line.
	last string
}

// stepInfo is what the prompts show of a step.
type stepInfo struct {
	execution, description string
}

// call runs one engine call under the command's per-call deadline.
func devCall[R any](d *devRun, do func(context.Context) (R, error)) (R, error) {
	ctx, cancel := context.WithTimeout(d.ctx, d.a.timeout)
	defer cancel()
	r, err := do(ctx)
	if err != nil {
		var zero R
		return zero, d.a.rpcError(err)
	}
	return r, nil
}

// run starts the run — of the file as it is, or of the registered copy
// once --register has replaced it — and drives it.
func (d *devRun) run(src *realmv1.WorkflowSource, params *structpb.Struct) error {
	start := &realmv1.StartRunRequest{Params: params, Caller: d.caller}
	var version float64
	if d.flags.register {
		r, err := d.register(src)
		if err != nil {
			return err
		}
		start.WorkflowId, version = r.GetWorkflowId(), r.GetVersion()
	} else {
		start.WorkflowSource = src
	}
	resp, err := devCall(d, func(ctx context.Context) (*realmv1.StartRunResponse, error) {
		return d.eng.StartRun(ctx, start)
	})
	if err != nil {
		return err
	}
	if r := resp.GetReport(); r != nil {
		if !r.GetValid() {
			printText(d.out, r.GetText())
			return refuse("No run was created: the workflow is not valid.")
		}
		printText(d.out, r.GetText())
		fmt.Fprintf(d.out, "Not registered: the run carries this file's definition; the registered copy of '%s', if any, is unchanged (--register replaces it).\n", r.GetWorkflowId())
		version = r.GetVersion()
	}
	sr := resp.GetReply()
	if sr.GetRunId() == "" {
		return refuse("%s", replyMessage(sr))
	}
	d.runID = sr.GetRunId()
	name, err := d.learn()
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "\nRealm — %s v%s\nRun ID: %s\n\n", name, number(version), d.runID)
	d.warn(sr.GetWarnings())
	d.chained(sr)
	if !succeeded(sr) {
		d.failed(sr)
	}
	return d.loop()
}

// register registers the workflow file (--register) and prints the
// loader's report with its Registered: line.
func (d *devRun) register(src *realmv1.WorkflowSource) (*realmv1.WorkflowReport, error) {
	reg, err := devCall(d, func(ctx context.Context) (*realmv1.RegisterWorkflowResponse, error) {
		return d.eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: src})
	})
	if err != nil {
		return nil, err
	}
	r := reg.GetReport()
	if !reg.GetRegistered() {
		printText(d.out, r.GetText())
		return nil, refuse("No run was created: the workflow was not registered.")
	}
	printText(d.out, replaceValidLine(r.GetText(), fmt.Sprintf("Registered: %s v%s (%s)", r.GetWorkflowId(), number(r.GetVersion()), plural(int(r.GetStepCount()), "step", "steps"))))
	return r, nil
}

// learn reads each step's kind and description from the protocol of the
// definition the run is decided by, and returns the workflow's name.
func (d *devRun) learn() (string, error) {
	resp, err := devCall(d, func(ctx context.Context) (*realmv1.GetWorkflowProtocolResponse, error) {
		return d.eng.GetWorkflowProtocol(ctx, &realmv1.GetWorkflowProtocolRequest{RunId: d.runID})
	})
	if err != nil {
		return "", err
	}
	d.steps = map[string]stepInfo{}
	p := resp.GetProtocol().AsMap()
	list, _ := p["steps"].([]any)
	for _, s := range list {
		m, _ := s.(map[string]any)
		id, _ := m["id"].(string)
		var info stepInfo
		info.execution, _ = m["execution"].(string)
		info.description, _ = m["description"].(string)
		d.steps[id] = info
	}
	name, _ := p["name"].(string)
	return name, nil
}

// state reads the run; withSteps adds each step's attempts and answers.
func (d *devRun) state(withSteps bool) (*realmv1.RunState, error) {
	resp, err := devCall(d, func(ctx context.Context) (*realmv1.GetRunStateResponse, error) {
		return d.eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: d.runID, IncludeSteps: withSteps})
	})
	if err != nil {
		return nil, err
	}
	if r := resp.GetRefusal(); r != nil {
		return nil, refuse("%s", replyMessage(r))
	}
	if resp.GetState() == nil {
		return nil, refuse("Error: engine-svc sent no state for run %s.", d.runID)
	}
	return resp.GetState(), nil
}

// loop drives the run until it ends, stalls, or the person leaves.
func (d *devRun) loop() error {
	var advancedAt int64 = -1
	for {
		st, err := d.state(false)
		if err != nil {
			return err
		}
		if st.GetTerminalState() {
			return d.finish(st)
		}
		owed := owesEngine(st.GetNextActions())
		switch {
		case owed && st.GetRunVersion() == advancedAt:
			// The engine was asked and nothing moved: asking again
			// would loop.
			return d.stall(st)
		case owed:
			advancedAt = st.GetRunVersion()
			err = d.advance()
		case st.GetPendingGate() != nil:
			err = d.gate(st)
		case d.agentStep(st) != "":
			err = d.agent(d.agentStep(st))
		case len(st.GetInProgressSteps()) > 0:
			err = d.waitInFlight(st)
		default:
			return d.stall(st)
		}
		if err != nil {
			return err
		}
	}
}

// owesEngine reports whether next_actions names advance_run: guards, auto
// steps or an expired question's on_expiry are owed to the engine.
func owesEngine(actions []*realmv1.NextAction) bool {
	for _, na := range actions {
		if na.GetInstruction().GetTool() == "advance_run" {
			return true
		}
	}
	return false
}

// agentStep is the first agent step next_actions offers, or "".
func (d *devRun) agentStep(st *realmv1.RunState) string {
	for _, na := range st.GetNextActions() {
		in := na.GetInstruction()
		if in.GetTool() != "execute_step" {
			continue
		}
		s := reply.Command(in)
		if d.steps[s].execution == "agent" {
			return s
		}
	}
	return ""
}

// advance has the engine run what it owes and prints what ran.
func (d *devRun) advance() error {
	resp, err := devCall(d, func(ctx context.Context) (*realmv1.AdvanceRunResponse, error) {
		return d.eng.AdvanceRun(ctx, &realmv1.AdvanceRunRequest{RunId: d.runID, Caller: d.caller})
	})
	if err != nil {
		return err
	}
	r := resp.GetReply()
	d.warn(r.GetWarnings())
	d.chained(r)
	if !succeeded(r) {
		d.failed(r)
	}
	return nil
}

// chained prints the auto and guard steps a reply ran, and the guards it
// decided.
func (d *devRun) chained(r *realmv1.Reply) {
	for _, c := range r.GetChainedAutoSteps() {
		kind := d.steps[c.GetStep()].execution
		if kind == "" {
			kind = "auto"
		}
		fmt.Fprintf(d.out, "→ [%s] %s\n", kind, c.GetStep())
		for _, w := range c.GetWarnings() {
			fmt.Fprintln(d.out, "  ⚠ "+w)
		}
		fmt.Fprintln(d.out, "  ✓ → "+reply.PhaseWord(c.GetRunPhase()))
		d.last = c.GetStep()
	}
	for _, g := range guardLines(r) {
		fmt.Fprintln(d.out, "  "+g)
	}
	if len(r.GetChainedAutoSteps()) > 0 {
		fmt.Fprintln(d.out)
	}
}

// failed prints cli.md §2.6's line for a step the engine ran and that failed.
func (d *devRun) failed(r *realmv1.Reply) {
	step := r.GetStoppedStep()
	if step == "" {
		step = r.GetCommand()
	}
	after := ""
	if d.last != "" {
		after = fmt.Sprintf(" after '%s' finished", d.last)
	}
	fmt.Fprintf(d.out, "  ✗ %s (step '%s', run by the engine%s): %s\n\n", reply.StatusWord(r.GetStatus()), step, after, replyMessage(r))
}

func (d *devRun) warn(lines []string) {
	for _, w := range lines {
		fmt.Fprintln(d.out, "⚠ "+w)
	}
}

// finish prints the run's ending; exit 0 only for a completed run.
func (d *devRun) finish(st *realmv1.RunState) error {
	fmt.Fprintf(d.out, "Run complete. Phase: %s\n", reply.PhaseWord(st.GetRunPhase()))
	x := st.GetExtra().AsMap()
	if res, ok := x["resumable"].(map[string]any); ok {
		if steps, _ := res["steps"].([]any); len(steps) > 0 {
			fmt.Fprintf(d.out, "  Resume:    realm run resume %s --from %v\n", d.runID, steps[0])
		}
	}
	if st.GetRunPhase() == realmv1.RunPhase_RUN_PHASE_ABANDONED && st.GetTerminalReason() != "" {
		fmt.Fprintf(d.out, "  Ended:     An operator ended this run, with the reason %q; to run the work again, start a new run.\n", st.GetTerminalReason())
	}
	if cp, ok := x["cleanup_pending"].(map[string]any); ok {
		steps, _ := cp["steps"].([]any)
		for _, s := range steps {
			fmt.Fprintf(d.out, "Cleanup step left pending: '%v' — to run it with code that has its handler: realm run drain %s --force\n", s, d.runID)
		}
	}
	if st.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		return &exitError{code: ExitRefused}
	}
	return nil
}

// stall prints why nothing else can run and the way out (cli.md §1.8).
func (d *devRun) stall(st *realmv1.RunState) error {
	fmt.Fprintln(d.out, "Workflow stalled: nothing else can run.")
	for _, l := range cannotRunLines(st) {
		fmt.Fprintln(d.out, l)
	}
	fmt.Fprintf(d.out, "Run %s stays open (phase '%s'): correct the workflow, register it again, then realm run advance %s — or end it: realm run abandon %s\n",
		d.runID, reply.PhaseWord(st.GetRunPhase()), d.runID, d.runID)
	return &exitError{code: ExitRefused}
}

// cannotRunLines are cli.md §1.8's `'<step>' cannot run (<check>): <why>.`
// lines for the ready steps the engine refuses before their claim.
func cannotRunLines(st *realmv1.RunState) []string {
	x := st.GetExtra().AsMap()
	var out []string
	for _, key := range []string{"engine_runnable", "agent_refused"} {
		list, _ := x[key].([]any)
		for _, e := range list {
			m, _ := e.(map[string]any)
			if ok, _ := m["runnable_here"].(bool); ok {
				continue
			}
			step, _ := m["step"].(string)
			check, _ := m["refused_by"].(string)
			why, _ := m["refusal"].(string)
			why = strings.TrimSuffix(why, ".")
			if check == "capability" {
				out = append(out, fmt.Sprintf("'%s' cannot run here (capability): %s — load the missing extension, or run the step on a runner that has it.", step, why))
				continue
			}
			out = append(out, fmt.Sprintf("'%s' cannot run (%s): %s.", step, check, why))
		}
	}
	return out
}

// waitInFlight waits, up to inFlightWait, for the record of a run whose
// step is in flight in another program to change.
func (d *devRun) waitInFlight(st *realmv1.RunState) error {
	step := st.GetInProgressSteps()[0]
	holder, since := claimOf(st, step)
	fmt.Fprintf(d.out, "• Step '%s' is in flight, taken by %s since %s: waiting up to %s for the run's record to change.\n", step, holder, since, seconds(inFlightWait))
	deadline := time.Now().Add(inFlightWait)
	for time.Now().Before(deadline) {
		select {
		case <-d.ctx.Done():
			return d.ctx.Err()
		case <-time.After(pollInterval):
		}
		now, err := d.state(false)
		if err != nil {
			return err
		}
		if now.GetRunVersion() != st.GetRunVersion() {
			return nil
		}
	}
	fmt.Fprintf(d.out, "• Step '%s' has been in flight since %s, taken by %s; the record has not changed for %s. If the program that took it is gone: realm run reclaim %s --step %s --force\n",
		step, since, holder, seconds(inFlightWait), d.runID, step)
	fmt.Fprintf(d.errw, "Stopped waiting — detached from run '%s' at step '%s' (phase: %s). The run is saved.\n", d.runID, step, reply.PhaseWord(st.GetRunPhase()))
	printLines(d.errw, d.detachMap(st))
	return &exitError{code: ExitRefused}
}

func seconds(t time.Duration) string { return fmt.Sprintf("%ds", int(t/time.Second)) }

// claimOf names the program holding a step's claim, and since when.
func claimOf(st *realmv1.RunState, step string) (string, string) {
	claims, _ := st.GetExtra().AsMap()["step_claims"].([]any)
	for _, c := range claims {
		m, _ := c.(map[string]any)
		if s, _ := m["step"].(string); s != step {
			continue
		}
		h, _ := m["holder"].(map[string]any)
		since, _ := m["since"].(string)
		if since == "" {
			since = "an unknown time"
		}
		return programWords(h), since
	}
	return programWords(nil), "an unknown time"
}

// newNonce is a fresh writer nonce for one answer.
func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
