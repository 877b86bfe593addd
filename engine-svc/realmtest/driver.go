package realmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
	"github.com/realm-go/realm/pkg/workflow"
)

// maxCalls bounds the calls one fixture makes: a workflow that keeps
// offering work forever fails its fixture instead of hanging the suite.
const maxCalls = 500

// driver plays every outside party of one fixture's run: the agent (its
// answers and injected errors), the person at each gate, and the program
// that asks the engine to run what it owes. It does only what each reply's
// next_actions offers, as a well-behaved client does.
type driver struct {
	eng        realmv1.EngineServiceClient
	def        *workflow.Definition
	f          Fixture
	runID      string
	errorsLeft map[string]int // agent errors injected so far, by step
}

var testCaller = &realmv1.Caller{By: callerName, BySource: "stated", Channel: realmv1.Channel_CHANNEL_RUN}

func (d *driver) drive(ctx context.Context) error {
	params, err := structpb.NewStruct(d.f.Params)
	if err != nil {
		return fmt.Errorf("params: %w", err)
	}
	start, err := d.eng.StartRun(ctx, &realmv1.StartRunRequest{WorkflowId: d.def.ID, Params: params, Caller: testCaller})
	if err != nil {
		return rpcError(err)
	}
	r := start.GetReply()
	d.runID = r.GetRunId()
	if d.runID == "" {
		return refusal(r)
	}
	for range maxCalls {
		if reply.Terminal(r.GetRunPhase()) {
			return nil
		}
		actions := r.GetNextActions()
		if len(actions) == 0 {
			return d.stalled(ctx, r)
		}
		in := actions[0].GetInstruction()
		args := reply.CallWith(in)
		var next *realmv1.Reply
		switch in.GetTool() {
		case "execute_step":
			next, err = d.execute(ctx, str(args["command"]))
		case "submit_human_response":
			next, err = d.answer(ctx, r, str(args["gate_id"]))
		case "advance_run":
			var resp *realmv1.AdvanceRunResponse
			resp, err = d.eng.AdvanceRun(ctx, &realmv1.AdvanceRunRequest{RunId: d.runID, Caller: testCaller})
			next = resp.GetReply()
		default:
			return d.stalled(ctx, r)
		}
		if err != nil {
			return err
		}
		if next.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR && !reply.Terminal(next.GetRunPhase()) {
			return refusal(next)
		}
		r = next
	}
	return fmt.Errorf("the run did not end within %d calls; the last reply said: %s", maxCalls, r.GetContextHint())
}

// execute runs one step: an agent step gets its injected errors first, one
// per call, then the fixture's answer; any other step runs as the engine
// runs it.
func (d *driver) execute(ctx context.Context, step string) (*realmv1.Reply, error) {
	req := &realmv1.ExecuteStepRequest{RunId: d.runID, Command: step, Caller: testCaller}
	if s := d.def.Steps[step]; s != nil && s.Execution == workflow.KindAgent {
		if errs := d.f.AgentErrors[step]; d.errorsLeft[step] < len(errs) {
			msg := errs[d.errorsLeft[step]]
			d.errorsLeft[step]++
			_, err := d.eng.RecordDriveFailure(ctx, &realmv1.RecordDriveFailureRequest{RunId: d.runID, Caller: testCaller, Failure: &realmv1.DriveFailure{
				Step: step, Provider: "fixture", ErrorClass: "other", Message: msg, AttemptsSdk: 1,
			}})
			if err != nil {
				return nil, rpcError(err)
			}
			// The run is as it was: the next call gets the same offer.
			st, err := d.eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: d.runID})
			if err != nil {
				return nil, rpcError(err)
			}
			return &realmv1.Reply{RunId: d.runID, RunPhase: st.GetState().GetRunPhase(), NextActions: st.GetState().GetNextActions()}, nil
		}
		answer, ok := d.f.AgentResponses[step].(map[string]any)
		if !ok {
			answer = map[string]any{}
		}
		p, err := structpb.NewStruct(answer)
		if err != nil {
			return nil, fmt.Errorf("agent_responses.%s: %w", step, err)
		}
		req.Params = p
	}
	resp, err := d.eng.ExecuteStep(ctx, req)
	if err != nil {
		return nil, rpcError(err)
	}
	return resp.GetReply(), nil
}

// answer answers the open gate with the fixture's choice for its step, or
// "approve".
func (d *driver) answer(ctx context.Context, r *realmv1.Reply, gateID string) (*realmv1.Reply, error) {
	step := r.GetGate().GetStepName()
	if step == "" || r.GetGate().GetGateId() != gateID {
		st, err := d.eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: d.runID})
		if err != nil {
			return nil, rpcError(err)
		}
		step = st.GetState().GetPendingGate().GetStepName()
		if gateID == "" || strings.HasPrefix(gateID, "<") {
			gateID = st.GetState().GetPendingGate().GetGateId()
		}
	}
	choice, ok := d.f.GateResponses[step]
	if !ok {
		choice = "approve"
	}
	resp, err := d.eng.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{RunId: d.runID, GateId: gateID, Choice: choice, Caller: testCaller})
	if err != nil {
		return nil, rpcError(err)
	}
	return resp.GetReply(), nil
}

// stalled explains a run that offers nothing more and has not ended.
func (d *driver) stalled(ctx context.Context, r *realmv1.Reply) error {
	st, err := d.eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: d.runID})
	if err != nil {
		return rpcError(err)
	}
	if reply.Terminal(st.GetState().GetRunPhase()) {
		return nil
	}
	lines := []string{fmt.Sprintf("the run stopped in phase '%s' with nothing left to call", reply.PhaseWord(st.GetState().GetRunPhase()))}
	lines = append(lines, st.GetState().GetWarnings()...)
	if hint := r.GetContextHint(); hint != "" {
		lines = append(lines, hint)
	}
	return errors.New(strings.Join(lines, "\n"))
}

// check compares the ended run with what the fixture expects and returns
// the phase it ended in.
func (d *driver) check(ctx context.Context) (string, error) {
	st, err := d.eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: d.runID})
	if err != nil {
		return "", rpcError(err)
	}
	phase := reply.PhaseWord(st.GetState().GetRunPhase())
	want := d.f.Expected
	if phase != want.FinalState {
		return phase, fmt.Errorf("assertFinalState: expected phase '%s' but run is in phase '%s'", want.FinalState, phase)
	}
	if want.SkippedSteps != nil {
		got := slices.Clone(st.GetState().GetSkippedSteps())
		exp := slices.Clone(*want.SkippedSteps)
		sort.Strings(got)
		sort.Strings(exp)
		if !slices.Equal(got, exp) {
			return phase, fmt.Errorf("Expected skipped_steps %s but got %s", jsonList(*want.SkippedSteps), jsonList(st.GetState().GetSkippedSteps()))
		}
	}
	if len(want.Evidence) == 0 {
		return phase, nil
	}
	evidence, err := d.evidence(ctx)
	if err != nil {
		return phase, err
	}
	for _, w := range want.Evidence {
		if !hasEntry(evidence, w) {
			if w.Status == "" {
				return phase, fmt.Errorf("Expected evidence for step '%s' not found", w.StepID)
			}
			return phase, fmt.Errorf("Expected evidence for step '%s' with status '%s' not found", w.StepID, w.Status)
		}
	}
	return phase, nil
}

type entry struct {
	StepID string `json:"step_id"`
	Status string `json:"status"`
}

// evidence reads the run's evidence from its export.
func (d *driver) evidence(ctx context.Context) ([]entry, error) {
	resp, err := d.eng.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: d.runID})
	if err != nil {
		return nil, rpcError(err)
	}
	var bundle struct {
		Run struct {
			Evidence []entry `json:"evidence"`
		} `json:"run"`
	}
	if err := json.Unmarshal(resp.GetBundle(), &bundle); err != nil {
		return nil, fmt.Errorf("reading the run's export: %w", err)
	}
	return bundle.Run.Evidence, nil
}

func hasEntry(evidence []entry, w ExpectedEvidence) bool {
	for _, e := range evidence {
		if e.StepID == w.StepID && (w.Status == "" || e.Status == w.Status) {
			return true
		}
	}
	return false
}

// refusal is an engine refusal as a fixture error: the engine's own
// sentences, the first one the headline.
func refusal(r *realmv1.Reply) error {
	lines := slices.Clone(r.GetErrors())
	if len(lines) == 0 && r.GetContextHint() != "" {
		lines = []string{r.GetContextHint()}
	}
	if len(lines) == 0 {
		lines = []string{"the engine refused the call (" + r.GetErrorCode() + ")"}
	}
	return errors.New(strings.Join(lines, "\n"))
}

func rpcError(err error) error {
	if s, ok := status.FromError(err); ok {
		return errors.New(s.Message())
	}
	return err
}

func str(v any) string { s, _ := v.(string); return s }

func jsonList(s []string) string {
	if s == nil {
		s = []string{}
	}
	b, _ := json.Marshal(s)
	return string(b)
}
