// Package drive is the agent driver's loop (seed "How it works", path 2):
// find the first eligible agent step, build its prompt, ask the model,
// hand the answer to the engine; on a schema refusal ask again with the
// errors; let the engine run the auto and guard steps; wait at gates; stop
// at the end. It talks to the engine over gRPC only and reports what it
// does as DriveEvents, each carrying the lines `realm agent` prints.
package drive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/agent-svc/internal/provider"
	"github.com/realm-go/realm/agent-svc/internal/tools"
	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
	"github.com/realm-go/realm/pkg/workflow"
)

// Defaults of the drive's waits.
const (
	DefaultSchemaRetries = 2
	// DefaultGatePoll is how often the run is re-read while a gate is open.
	DefaultGatePoll = 3 * time.Second
	// MaxGatePoll bounds the gate poll interval.
	MaxGatePoll = 3 * time.Second
	// DefaultInFlightWait is how long an unchanged run with steps in
	// flight elsewhere is waited for.
	DefaultInFlightWait = 60 * time.Second
)

// Options are one drive's settings.
type Options struct {
	// Provider asks the model; its Name is recorded.
	Provider provider.Provider
	Model    string
	// Flags are the drive flags, repeated in the re-attach command.
	Flags Flags
	// SchemaRetries is the repair budget (negative: the default 2).
	SchemaRetries int
	// PerAttempt limits one model attempt; 0 is the 600 s default.
	PerAttempt      time.Duration
	PromptCache     bool
	MintWriterNonce bool
	// GatePoll is the gate poll interval (0: 3 s; at most 3 s).
	GatePoll time.Duration
	// InFlightWait bounds the wait for steps in flight elsewhere (0: 60 s).
	InFlightWait time.Duration
	// Durable is a drive its service owns (detached): its run is owed a
	// drive until it ends, so once the run exists an engine that cannot be
	// reached (a replica died, a deploy) is waited out, and steps in
	// flight elsewhere are waited for however long they run, instead of
	// ending the drive.
	Durable bool
	// Caller is recorded on the drive's claims and evidence (channel agent).
	Caller *realmv1.Caller
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Warnings are printed (stderr) before the drive's header.
	Warnings []string
	// Registry, when set, is read as a new run starts for the handlers
	// and adapters no live runner offers (capabilityWarnings).
	Registry realmv1.RegistryServiceClient
	// Environ is the environment '${NAME}' in mcp_servers is expanded
	// from and redaction hides (NAME=value entries; nil: the process's).
	Environ []string
	// ToolEnv are the only variables '${NAME}' may read; nil: any but
	// the driver's own credentials (toolEnvReadable).
	ToolEnv []string
	// Slot is the drive's place under the drive limit (nil: no limit).
	// The drive holds it while it asks a model and parks it while it
	// waits on a person.
	Slot Slot
}

// Slot is the drive's place under the drive limit.
type Slot interface {
	// Hold takes the slot if the drive does not hold it (waiting its turn)
	// and returns a context for model calls that ends when the slot is
	// lost.
	Hold(ctx context.Context) (context.Context, error)
	// Park gives the slot back while the drive waits on a person.
	Park()
}

// errSlotLost is a model call cut because the drive's slot was lost: the
// step is asked again once a slot is held, and nothing is recorded.
var errSlotLost = errors.New("drive slot lost")

// Emit sends one event to the caller; an error ends the drive.
type Emit func(*realmv1.DriveEvent) error

// errStopped ends the loop after the event that says why was sent.
var errStopped = errors.New("drive stopped")

type stepInfo struct {
	execution, description, profile string
	// strictRequested is `structured_output: strict`; strict says it is
	// sent (strict.go's strictPlan), else strictReason says why not.
	strict          bool
	strictRequested bool
	strictReason    string
	// strictCaveats are the verdict's notes under the active provider's
	// rules; strictNote is the one ⚠ line for a requested strict that is
	// ineligible or has caveats.
	strictCaveats []string
	strictNote    string
	// display is the step's `display` template (the result and gate
	// text); llmTimeout its llm_timeout_seconds (0: the flag's limit).
	display    string
	llmTimeout time.Duration
	// needs is the capability an auto step needs: {"handler"|"adapter",
	// name}, empty for none.
	needs [2]string
	// budgetNote warns that --schema-retries outlasts the step's
	// validation-exhaustion threshold (printed once per step).
	budgetNote string
	// tools is set on a tool-calling step.
	tools *toolStep
}

type driver struct {
	ctx    context.Context
	eng    realmv1.EngineServiceClient
	o      Options
	emit   Emit
	runID  string
	steps  map[string]stepInfo
	lastOK struct {
		step   string
		output map[string]any
	}
	gateShown string
	// named marks the refused steps already named in this drive.
	named map[string]bool
	// capabilityTried says the drive has tried a capability-blocked step.
	capabilityTried bool
	// budgetWarned marks the steps whose repair-budget warning was shown.
	budgetWarned map[string]bool
	// strictWarned marks the steps whose structured-output ⚠ line was
	// shown.
	strictWarned map[string]bool
	// downgraded keeps, per step name, the live downgrade of a strict
	// request: later attempts of the step go out without strict and
	// report it (§8.5).
	downgraded map[string]*provider.Downgrade
	// modelCtx is the context of model calls: the drive's, ending too
	// when its slot is lost.
	modelCtx context.Context
	// pool are the workflow's MCP servers, started when a step needs
	// them and stopped when the drive ends.
	pool *tools.Pool
}

// Run drives the run req names (a new run, or one attached by id) and
// sends its events; the last is always FINISHED. The returned error is
// only a failure to send an event (the caller went away).
func Run(ctx context.Context, eng realmv1.EngineServiceClient, req *realmv1.DriveRunRequest, o Options, emit Emit) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SchemaRetries < 0 {
		o.SchemaRetries = DefaultSchemaRetries
	}
	if o.GatePoll <= 0 {
		o.GatePoll = DefaultGatePoll
	}
	o.GatePoll = min(o.GatePoll, MaxGatePoll)
	if o.InFlightWait <= 0 {
		o.InFlightWait = DefaultInFlightWait
	}
	caller := &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_AGENT}
	if o.Caller != nil {
		caller.By, caller.BySource = o.Caller.GetBy(), o.Caller.GetBySource()
	}
	o.Caller = caller
	d := &driver{ctx: ctx, eng: eng, o: o, emit: emit, budgetWarned: map[string]bool{}, named: map[string]bool{},
		strictWarned: map[string]bool{}, downgraded: map[string]*provider.Downgrade{}}
	defer d.closeTools()
	err := d.open(ctx, req)
	if err == nil {
		err = d.loop(ctx)
	}
	if errors.Is(err, errSend) {
		return err
	}
	var rf *refusal
	if errors.As(err, &rf) {
		return d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED, RunId: d.runID,
			Lines: stderr(rf.lines...), Outcome: realmv1.DriveOutcome_DRIVE_OUTCOME_REFUSED, ExitCode: 1})
	}
	if err != nil && !errors.Is(err, errStopped) {
		// Something unexpected after the run exists: say it, then end.
		msg := "✗ " + oneLine(client.Cause(err))
		if ctx.Err() != nil {
			msg = "✗ The drive was cancelled."
		}
		if e := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED, RunId: d.runID,
			Lines: stderr(msg, d.reattachLine()), ReattachCommand: d.reattach(),
			Failure: d.failure("", &provider.CallError{Class: provider.ClassOther, Message: oneLine(client.Cause(err))})}); e != nil {
			return e
		}
	}
	return d.finish(ctx, err != nil)
}

// refusal is a drive refused before any run was driven.
type refusal struct{ lines []string }

func (r *refusal) Error() string { return strings.Join(r.lines, "\n") }

func refuse(format string, args ...any) error {
	return &refusal{lines: []string{fmt.Sprintf(format, args...)}}
}

var errSend = errors.New("drive: the caller went away")

func (d *driver) send(ev *realmv1.DriveEvent) error {
	if ev.RunId == "" {
		ev.RunId = d.runID
	}
	if err := d.emit(ev); err != nil {
		return fmt.Errorf("%w: %v", errSend, err)
	}
	return nil
}

func lines(s realmv1.DriveStream, texts ...string) []*realmv1.DriveLine {
	out := make([]*realmv1.DriveLine, 0, len(texts))
	for _, t := range texts {
		out = append(out, &realmv1.DriveLine{Text: t, Stream: s})
	}
	return out
}

func stdout(texts ...string) []*realmv1.DriveLine {
	return lines(realmv1.DriveStream_DRIVE_STREAM_STDOUT, texts...)
}

func stderr(texts ...string) []*realmv1.DriveLine {
	return lines(realmv1.DriveStream_DRIVE_STREAM_STDERR, texts...)
}

// open starts the run (registering a workflow file first) or attaches to
// one, learns the workflow's steps, and sends STARTED.
func (d *driver) open(ctx context.Context, req *realmv1.DriveRunRequest) error {
	n := 0
	for _, set := range []bool{req.GetWorkflowId() != "", req.GetWorkflowSource() != nil, req.GetRunId() != ""} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return refuse("Error: one of --workflow or --run-id is required")
	case n > 1 && req.GetRunId() != "":
		return refuse("Error: --workflow and --run-id are mutually exclusive")
	case n > 1:
		return refuse("Error: give a workflow id or a workflow file, not both")
	case req.GetRunId() != "" && len(req.GetParams().GetFields()) > 0:
		return refuse("Error: --params cannot be used with --run-id; the run already has params from creation time")
	case req.GetRegister() && req.GetWorkflowSource() == nil:
		return refuse("Error: --register registers a workflow file: give --workflow <file>, or register with realm workflow register <path>")
	}
	var workflowID string
	if id := req.GetRunId(); id != "" {
		resp, err := d.eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: id})
		if err != nil {
			return refuse("Error: %s", oneLine(client.Cause(err)))
		}
		if r := resp.GetRefusal(); r != nil {
			return refuse("Error: %s", replyMessage(r))
		}
		st := resp.GetState()
		if st.GetTerminalState() {
			why := st.GetTerminalReason()
			if why == "" {
				why = reply.PhaseWord(st.GetRunPhase())
			}
			return refuse("Error: Run %s is already in terminal state: %s.", id, why)
		}
		d.runID, workflowID = id, st.GetWorkflowId()
	} else {
		id, err := d.create(ctx, req)
		if err != nil {
			return err
		}
		workflowID = id
	}
	name, version, err := d.learn(ctx, workflowID)
	if err != nil {
		return err
	}
	warnings := d.o.Warnings
	if req.GetRunId() == "" {
		warnings = append(slices.Clip(warnings), d.capabilityWarnings(ctx)...)
	}
	return d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_STARTED,
		WorkflowId: workflowID, WorkflowName: name, WorkflowVersion: version,
		Lines: append(stderr(warnings...), stdout("", fmt.Sprintf("Realm Agent — %s v%s", name, strconv.FormatFloat(version, 'f', -1, 64)), "Run ID: "+d.runID, "")...)})
}

// create starts the drive's run and returns its workflow id. A workflow
// file runs without registering: the run carries its definition, and the
// registered copy of its id is left as it is; with register the file is
// registered first (replacing that copy) and the run reads the registered
// copy, as a run of a workflow id does.
func (d *driver) create(ctx context.Context, req *realmv1.DriveRunRequest) (string, error) {
	start := &realmv1.StartRunRequest{WorkflowId: req.GetWorkflowId(), Params: req.GetParams(), Caller: d.o.Caller}
	if src := req.GetWorkflowSource(); src != nil && req.GetRegister() {
		resp, err := d.eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: src})
		if err != nil {
			return "", refuse("Error: %s", oneLine(client.Cause(err)))
		}
		if !resp.GetRegistered() {
			return "", refuse("Error: Invalid workflow: %s", strings.Join(resp.GetReport().GetErrors(), "; "))
		}
		start.WorkflowId = resp.GetReport().GetWorkflowId()
	} else if src != nil {
		start.WorkflowSource = src
	}
	resp, err := d.eng.StartRun(ctx, start)
	if err != nil {
		return "", refuse("Error: %s", oneLine(client.Cause(err)))
	}
	if rep := resp.GetReport(); rep != nil && !rep.GetValid() {
		return "", refuse("Error: Invalid workflow: %s", strings.Join(rep.GetErrors(), "; "))
	}
	r := resp.GetReply()
	if r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR || r.GetRunId() == "" {
		return "", refuse("Error: %s", replyMessage(r))
	}
	d.runID = r.GetRunId()
	if rep := resp.GetReport(); rep != nil {
		return rep.GetWorkflowId(), nil
	}
	return start.WorkflowId, nil
}

// learn reads the steps (kind, description, agent profile), name and
// version of the definition the run is decided by — the copy it carries
// when it was started from a file without registering, else the registered
// copy — from its protocol.
func (d *driver) learn(ctx context.Context, workflowID string) (string, float64, error) {
	resp, err := d.eng.GetWorkflowProtocol(ctx, &realmv1.GetWorkflowProtocolRequest{WorkflowId: workflowID, RunId: d.runID})
	if err != nil {
		return "", 0, refuse("Error: Workflow not found: %s — %s", workflowID, oneLine(client.Cause(err)))
	}
	p := resp.GetProtocol().AsMap()
	d.steps = map[string]stepInfo{}
	steps, _ := p["steps"].([]any)
	for _, s := range steps {
		m, _ := s.(map[string]any)
		id, _ := m["id"].(string)
		info := stepInfo{}
		info.execution, _ = m["execution"].(string)
		info.description, _ = m["description"].(string)
		info.profile, _ = m["agent_profile_instructions"].(string)
		d.steps[id] = info
	}
	d.readStrict(resp.GetDefinition())
	d.readControls(resp.GetDefinition())
	d.readTools(resp.GetDefinition())
	name, _ := p["name"].(string)
	var label struct {
		Version float64 `json:"version"`
	}
	_ = json.Unmarshal(resp.GetDefinition(), &label)
	version := label.Version
	if name == "" {
		name = workflowID
	}
	return name, version, nil
}

// replyMessage is a refusal's message: its errors, else its hint.
func replyMessage(r *realmv1.Reply) string {
	if len(r.GetErrors()) > 0 {
		return oneLine(strings.Join(r.GetErrors(), "; "))
	}
	if h := r.GetContextHint(); h != "" {
		return oneLine(h)
	}
	return "engine-svc sent an empty reply."
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// state reads the run.
func (d *driver) state(ctx context.Context) (*realmv1.RunState, error) {
	resp, err := d.eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: d.runID})
	if err != nil {
		return nil, err
	}
	if r := resp.GetRefusal(); r != nil {
		return nil, errors.New(replyMessage(r))
	}
	return resp.GetState(), nil
}

// loop is the drive: until the run ends or nothing more can be done here.
// A durable drive goes on from the run's record after an engine call that
// could not be made or answered.
func (d *driver) loop(ctx context.Context) error {
	wait := durableRetryMin
	for {
		err := d.untilBlocked(ctx)
		if !d.o.Durable || !transient(err) || ctx.Err() != nil {
			return err
		}
		if e := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_QUEUED, RunId: d.runID,
			Lines: stderr(fmt.Sprintf("… engine-svc did not answer (%s); going on from the run's record in %s", oneLine(client.Cause(err)), wait))}); e != nil {
			return e
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, durableRetryMax)
	}
}

// A durable drive waits this long after an engine call that failed, then
// twice as long after each further one, up to durableRetryMax.
const (
	durableRetryMin = 250 * time.Millisecond
	durableRetryMax = 5 * time.Second
)

// transient reports whether err is an engine call that failed for want of
// an engine (unreachable, cut off, out of time, its store down or its
// write lost to a race) rather than an answer about the run.
func transient(err error) bool {
	if err == nil || errors.Is(err, errStopped) || errors.Is(err, errSend) {
		return false
	}
	if ce, ok := errcode.FromStatus(err); ok {
		return ce.Code == errcode.EngineStoreFailed || ce.Code == errcode.StateSnapshotMismatch
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.Canceled, codes.ResourceExhausted:
		return true
	}
	return false
}

// untilBlocked drives until the run ends, nothing more can be done here, or an
// engine call fails.
func (d *driver) untilBlocked(ctx context.Context) error {
	for {
		st, err := d.state(ctx)
		if err != nil {
			return err
		}
		if st.GetTerminalState() {
			return nil
		}
		if g := st.GetPendingGate(); g != nil {
			// A drive waiting on a person holds no slot.
			if d.o.Slot != nil {
				d.o.Slot.Park()
			}
			if err := d.atGate(ctx, st, g); err != nil {
				return err
			}
			continue
		}
		if d.gateShown != "" {
			if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_RESOLVED,
				Gate: &realmv1.Gate{GateId: d.gateShown}, RunPhase: st.GetRunPhase()}); err != nil {
				return err
			}
			d.gateShown = ""
		}
		if err := d.nameRefused(st); err != nil {
			return err
		}
		if owes(st.GetNextActions()) {
			// The engine's work (handlers, guards) is not a model's: the
			// slot is given back while it runs.
			if d.o.Slot != nil {
				d.o.Slot.Park()
			}
			if err := d.advance(ctx); err != nil {
				return err
			}
			continue
		}
		if na := d.firstAgentStep(st.GetNextActions()); na != nil {
			d.modelCtx = ctx
			if d.o.Slot != nil {
				if d.modelCtx, err = d.o.Slot.Hold(ctx); err != nil {
					return err
				}
			}
			err := d.driveStep(ctx, st, na)
			if errors.Is(err, errSlotLost) {
				if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_QUEUED,
					Lines: stderr("… the drive slot was lost (its lease ran out); waiting for a slot to ask again")}); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			continue
		}
		if r := d.firstRefused(st); r != nil {
			var failure *realmv1.DriveFailure
			if r.check == "input_schema" {
				// Only an input refusal is the drive's failure to record;
				// trust and preconditions are the workflow's (§12.1).
				failure = d.failure(r.step, &provider.CallError{Class: provider.ClassValidationRejected,
					Message: fmt.Sprintf("'%s' cannot run (%s): %s", r.step, r.check, r.why)})
			}
			return d.stop(failure, r.step, driveStopsLine(d.runID, reply.PhaseWord(st.GetRunPhase()), *r))
		}
		if len(st.GetInProgressSteps()) > 0 {
			if d.o.Slot != nil {
				d.o.Slot.Park()
			}
			changed, err := d.waitInFlight(ctx, st)
			if err != nil {
				return err
			}
			if changed {
				continue
			}
			var out []string
			for _, s := range st.GetInProgressSteps() {
				if s == st.GetPendingGate().GetStepName() {
					continue // an open question is not in flight
				}
				program, since, stale := claimOf(st, s)
				out = append(out, inFlightLine(d.runID, s, program, since, stale, d.o.InFlightWait))
			}
			return d.stop(nil, "", append(out, d.reattachLine())...)
		}
		if st.GetNextActionsStatus() == "blocked_on_capability" {
			// A drive with nothing else to run tries the blocked step once
			// (a runner may have come since), then says it is blocked (§4 D).
			if !d.capabilityTried {
				d.capabilityTried = true
				if err := d.advance(ctx); err != nil {
					return err
				}
				continue
			}
			if step, kind, name := blockedStep(st); step != "" {
				return d.blocked(step, kind, name)
			}
		}
		return d.stop(nil, "", fmt.Sprintf("✗ The drive stops: nothing can run now (next_actions_status '%s'). Run %s stays open (phase '%s').",
			st.GetNextActionsStatus(), d.runID, reply.PhaseWord(st.GetRunPhase())), d.reattachLine())
	}
}

// stop sends BLOCKED with lines (stderr) and ends the loop.
func (d *driver) stop(failure *realmv1.DriveFailure, step string, texts ...string) error {
	if failure != nil && d.runID != "" {
		// The run records the failure (drive_failures), so its health shows
		// drive_failing and its updated_at moves. A failure to record it is
		// not a reason to hide the drive's own outcome.
		if _, err := d.eng.RecordDriveFailure(d.ctx, &realmv1.RecordDriveFailureRequest{RunId: d.runID, Failure: failure}); err != nil {
			texts = append(texts, fmt.Sprintf("⚠ the drive failure could not be recorded on the run: %v", err))
		}
	}
	if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED, Step: step,
		Lines: stderr(texts...), Failure: failure, ReattachCommand: d.reattach()}); err != nil {
		return err
	}
	return errStopped
}

// owes reports whether next_actions names advance_run: the engine owes
// guards, auto steps, or an expired gate's on_expiry.
func owes(actions []*realmv1.NextAction) bool {
	for _, a := range actions {
		if a.GetInstruction().GetTool() == "advance_run" {
			return true
		}
	}
	return false
}

// firstAgentStep is the first execute_step action for an agent step, in
// the engine's order.
func (d *driver) firstAgentStep(actions []*realmv1.NextAction) *realmv1.NextAction {
	for _, a := range actions {
		in := a.GetInstruction()
		if in.GetTool() != "execute_step" {
			continue
		}
		step := reply.Command(in)
		if info, ok := d.steps[step]; ok && info.execution == "agent" {
			return a
		}
	}
	return nil
}

// advance asks the engine to run what it owes and reports what ran.
func (d *driver) advance(ctx context.Context) error {
	resp, err := d.eng.AdvanceRun(ctx, &realmv1.AdvanceRunRequest{RunId: d.runID, Caller: d.o.Caller})
	if err != nil {
		return err
	}
	r := resp.GetReply()
	if err := d.chained(r); err != nil {
		return err
	}
	switch r.GetStatus() {
	case realmv1.ReplyStatus_REPLY_STATUS_OK, realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED:
		return nil
	}
	if reply.Terminal(r.GetRunPhase()) {
		return nil
	}
	switch errcode.Code(r.GetErrorCode()) {
	case errcode.EngineHandlerNotRegistered, errcode.EngineAdapterNotRegistered:
		if step, needs := r.GetStoppedStep(), d.steps[r.GetStoppedStep()].needs; step != "" && needs[0] != "" {
			return d.blocked(step, needs[0], needs[1])
		}
	}
	return d.stop(nil, r.GetCommand(), "✗ "+replyMessage(r), d.reattachLine())
}

// nameRefused prints, once per drive, each owed auto step the engine
// refuses before its claim (§15).
func (d *driver) nameRefused(st *realmv1.RunState) error {
	var out []string
	for _, r := range refusedSteps(st) {
		if !d.named[r.step] {
			d.named[r.step] = true
			out = append(out, cannotRunLine(r))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED, RunPhase: st.GetRunPhase(), Lines: stdout(out...)})
}

// firstRefused is the first owed auto step refused before its claim for a
// reason other than capability, or nil.
func (d *driver) firstRefused(st *realmv1.RunState) *refusedStep {
	for _, r := range refusedSteps(st) {
		if r.check != "capability" {
			return &r
		}
	}
	return nil
}

// blocked ends the drive at a step no live runner can run: its attempt,
// then §15's line.
func (d *driver) blocked(step, kind, name string) error {
	if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED, Step: step,
		Lines:           append(stdout("→ [auto] "+step), stderr(capabilityBlockedLine(step, kind, name, d.reattach()))...),
		ReattachCommand: d.reattach()}); err != nil {
		return err
	}
	return errStopped
}

// chained reports the auto and guard steps a reply ran.
func (d *driver) chained(r *realmv1.Reply) error {
	if len(r.GetChainedAutoSteps()) == 0 {
		return nil
	}
	var out []string
	for _, c := range r.GetChainedAutoSteps() {
		out = append(out, "→ [auto] "+c.GetStep(), "  ✓ → "+reply.PhaseWord(c.GetRunPhase()))
		for _, w := range c.GetWarnings() {
			out = append(out, "  ⚠ "+w)
		}
	}
	return d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_AUTO_STEPS_CHAINED,
		Chained: r.GetChainedAutoSteps(), RunPhase: r.GetRunPhase(), Lines: stdout(out...)})
}

// waitInFlight re-reads the run every second until its version changes,
// for up to InFlightWait.
func (d *driver) waitInFlight(ctx context.Context, st *realmv1.RunState) (bool, error) {
	deadline := d.o.Now().Add(d.o.InFlightWait)
	// A durable drive waits as long as the steps run: their claims are
	// renewed while they do, and the engine's sweeper frees them if their
	// process died.
	for d.o.Durable || d.o.Now().Before(deadline) {
		if err := sleep(ctx, min(time.Second, d.o.InFlightWait)); err != nil {
			return false, err
		}
		now, err := d.state(ctx)
		if err != nil {
			return false, err
		}
		if now.GetRunVersion() != st.GetRunVersion() {
			return true, nil
		}
	}
	return false, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// finish reads the run's phase and sends the last event.
func (d *driver) finish(ctx context.Context, stopped bool) error {
	phase := realmv1.RunPhase_RUN_PHASE_UNSPECIFIED
	if st, err := d.state(ctx); err == nil {
		phase = st.GetRunPhase()
	}
	ev := &realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED, RunPhase: phase, ExitCode: 1}
	switch {
	case phase == realmv1.RunPhase_RUN_PHASE_COMPLETED:
		ev.Outcome, ev.ExitCode = realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED, 0
		ev.Lines = stdout("", "Run complete: "+d.runID)
		if d.lastOK.step != "" {
			ev.Lines = append(ev.Lines, stdout("", "Result ("+d.lastOK.step+"):", d.result())...)
		}
	case reply.Terminal(phase):
		ev.Outcome = realmv1.DriveOutcome_DRIVE_OUTCOME_ENDED
		ev.Lines = stderr("", "Run ended in phase: "+reply.PhaseWord(phase))
	default:
		ev.Outcome = realmv1.DriveOutcome_DRIVE_OUTCOME_STOPPED
		word := reply.PhaseWord(phase)
		if word == "" {
			word = "unknown"
		}
		ev.Lines = stderr("", "Run ended in phase: "+word)
		ev.ReattachCommand = d.reattach()
	}
	_ = stopped
	return d.send(ev)
}

// schemaJSON is the effective schema as JSON, or nil when the step has
// none (absent, or the boolean schema true).
func schemaJSON(na *realmv1.NextAction) json.RawMessage {
	b := bytes.TrimLeft(reply.InputSchemaJSON(na), " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	return b
}

func newNonce() string { return uuid.NewString() }

// readControls reads each step's `display` template and
// llm_timeout_seconds from the registered definition.
func (d *driver) readControls(definition []byte) {
	var def workflow.Definition
	if len(definition) == 0 || json.Unmarshal(definition, &def) != nil {
		return
	}
	for id, st := range def.Steps {
		info, ok := d.steps[id]
		if !ok || st == nil {
			continue
		}
		info.display = st.Display
		switch {
		case st.Handler != "":
			info.needs = [2]string{"handler", st.Handler}
		case st.UsesService != "" && def.Services[st.UsesService] != nil:
			info.needs = [2]string{"adapter", def.Services[st.UsesService].Adapter}
		}
		info.llmTimeout = time.Duration(st.LLMTimeoutSeconds) * time.Second
		if st.Execution == workflow.KindAgent && st.HasSchema() {
			info.budgetNote = repairBudgetLine(id, d.o.SchemaRetries, st.Threshold())
		}
		d.steps[id] = info
	}
}

// result is the last agent step's output as `Result (<step>):` shows it:
// its display template rendered, else indented JSON (agent driver §16).
func (d *driver) result() string {
	if t := d.steps[d.lastOK.step].display; t != "" {
		return reply.Display(t, d.lastOK.output)
	}
	b, _ := json.MarshalIndent(d.lastOK.output, "", "  ")
	return string(b)
}
