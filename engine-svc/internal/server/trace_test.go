package server_test

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func TestTraceEntriesAreBufferedThenAdoptedByTheirWriter(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/triage.yaml"))
		run := start(t, e, "triage", map[string]any{"ticket": 3}).GetRunId()
		appendTrace := func(step, nonce, event string) *realmv1.AppendTraceResponse {
			data, _ := structpb.NewStruct(map[string]any{"page": 1, "nested": map[string]any{"x": 1}})
			resp, err := e.client.AppendTrace(ctx(t), &realmv1.AppendTraceRequest{RunId: run, StepId: step, WriterNonce: nonce,
				Entries: []*realmv1.TraceEntry{{Event: event, Data: data}}})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		first := appendTrace("classify", "n1", "read_ticket")
		c := first.GetCounts()
		if c.GetBufferCount() != 1 || c.GetFileCount() != 1 || c.GetLimitCount() != 200 || c.GetLimitBytes() != 102400 ||
			c.GetFinalLimitEntries() != 100 || c.GetFinalLimitBytes() != 51200 || c.GetFileLimitCount() != 400 || c.GetFileLimitBytes() != 204800 {
			t.Fatalf("counts = %v", c)
		}
		appendTrace("classify", "", "anonymous_note")
		if c := appendTrace("classify", "n2", "other_writer").GetCounts(); c.GetBufferCount() != 1 || c.GetFileCount() != 3 {
			t.Errorf("third append counts = %v", c)
		}
		if r := appendTrace("nope", "", "x").GetRefusal(); r.GetErrorCode() != "STEP_NOT_FOUND" || r.GetErrors()[0] != "Step 'nope' not found in workflow 'triage'." {
			t.Errorf("unknown step = %v", r)
		}

		resp, err := e.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: "classify", WriterNonce: "n1",
			Params: params(t, map[string]any{"category": "bug", "confidence": 0.9}), Trace: []*realmv1.TraceEntry{{Event: "decided"}}})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetReply()
		if r.GetAdoptedOwn() != 1 || r.GetAdoptedAnonymous() != 1 || r.GetPreservedForeign() != 1 {
			t.Errorf("adopted = %d/%d/%d", r.GetAdoptedOwn(), r.GetAdoptedAnonymous(), r.GetPreservedForeign())
		}
		ev, err := e.st.Evidence(ctx(t), run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var entry struct {
			StepID string           `json:"step_id"`
			Trace  []map[string]any `json:"trace"`
		}
		if err := json.Unmarshal(ev[0], &entry); err != nil {
			t.Fatal(err)
		}
		if entry.StepID != "classify" || len(entry.Trace) != 3 || entry.Trace[0]["event"] != "read_ticket" || entry.Trace[2]["event"] != "decided" {
			t.Errorf("recorded trace = %+v", entry)
		}
		if _, nested := entry.Trace[0]["data"].(map[string]any)["nested"]; nested {
			t.Errorf("a non-scalar data value was kept: %v", entry.Trace[0])
		}
		if r := appendTrace("classify", "n1", "late").GetRefusal(); r.GetErrorCode() != "STATE_STEP_NOT_ELIGIBLE" || r.GetErrors()[0] != "Step 'classify' has already completed." {
			t.Errorf("append after completion = %v", r)
		}
	})
}

// tracedWorkflow's one agent step wants at least two trace entries, each
// with an event of its list (spec §9.4), in the given mode.
func tracedWorkflow(mode string) []byte {
	return []byte(`id: traced_` + mode + `
name: Traced
version: 1
steps:
  look:
    description: Look and say what you saw.
    execution: agent
    input_schema: { type: object, required: [seen], properties: { seen: { type: string } } }
    trace_validation_mode: ` + mode + `
    trace_schema:
      type: array
      minItems: 2
      items: { type: object, properties: { event: { enum: [opened, read, decided] } } }
`)
}

func TestTheTraceIsCheckedAgainstItsSchemaWhenTheStepIsCalled(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		answer := func(run string, events ...string) *realmv1.Reply {
			var tr []*realmv1.TraceEntry
			for _, ev := range events {
				tr = append(tr, &realmv1.TraceEntry{Event: ev})
			}
			resp, err := e.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: "look",
				Params: params(t, map[string]any{"seen": "a bird"}), Trace: tr})
			if err != nil {
				t.Fatal(err)
			}
			return resp.GetReply()
		}
		for _, mode := range []string{"warn", "enforce"} {
			if r := e.register(t, tracedWorkflow(mode)); !r.GetRegistered() {
				t.Fatal(r.GetReport().GetText())
			}
		}

		// warn: the step completes, and the reply says what did not fit.
		run := start(t, e, "traced_warn", nil).GetRunId()
		r := answer(run, "opened")
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || len(r.GetWarnings()) != 1 ||
			r.GetWarnings()[0] != "Trace schema violation for step 'look': must NOT have fewer than 2 items" {
			t.Errorf("warn mode = %v", r)
		}

		// enforce: refused, nothing written, the step stays open; a
		// buffered entry counts toward the whole list.
		run = start(t, e, "traced_enforce", nil).GetRunId()
		before := state(t, e, run).GetRunVersion()
		r = answer(run, "opened", "wandered")
		if r.GetErrorCode() != "VALIDATION_TRACE_SCHEMA" || r.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT ||
			len(r.GetErrors()) != 2 || r.GetErrors()[0] != "Trace schema validation failed for step 'look'" ||
			r.GetErrors()[1] != "/1/event must be equal to one of the allowed values" {
			t.Fatalf("enforce mode = %v", r)
		}
		if st := state(t, e, run); st.GetRunVersion() != before || st.GetTerminalState() {
			t.Errorf("the refusal wrote: version %d → %d", before, st.GetRunVersion())
		}
		if _, err := e.client.AppendTrace(ctx(t), &realmv1.AppendTraceRequest{RunId: run, StepId: "look",
			Entries: []*realmv1.TraceEntry{{Event: "opened"}}}); err != nil {
			t.Fatal(err)
		}
		if r := answer(run, "decided"); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || len(r.GetWarnings()) != 0 {
			t.Errorf("buffered + sent entries that fit = %v", r)
		}
	})
}
