package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

const bigOutput = `id: big
name: Big output
version: 1
steps:
  make:
    description: Makes an output past the limit.
    execution: auto
    handler: big
`

// Each value a caller or a handler hands the engine is bounded (1 MiB;
// 4 KiB for a gate's choice): past it the call is refused with
// RESOURCE_TOO_LARGE and nothing of it is recorded, so no later call
// carries it (a run past 4 MiB of outputs broke every later handler call
// and export).
func TestEachValueIsBoundedAndNothingIsHalfWritten(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	var calls atomic.Int64
	startRunner(t, a, map[string]handlerFunc{
		"big": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			calls.Add(1)
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"blob": strings.Repeat("x", 3<<19)})}, nil
		},
	})
	a.register(t, readFile(t, "testdata/support.yaml"))
	a.register(t, []byte(bigOutput))
	huge := strings.Repeat("y", 1<<20+1)
	tooLarge := func(what string, err error) {
		t.Helper()
		if ce, ok := errcode.FromStatus(err); !ok || ce.Code != errcode.ResourceTooLarge || !strings.Contains(ce.Message, "over the limit") {
			t.Errorf("%s: %v, want RESOURCE_TOO_LARGE", what, err)
		}
	}

	_, err := a.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowId: "support", Params: params(t, map[string]any{"note": huge})})
	tooLarge("params", err)
	if list, _ := a.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "support"}); len(list.GetRuns()) != 0 {
		t.Errorf("a refused start made runs: %v", list.GetRuns())
	}

	run := start(t, a, "support", nil).GetRunId()
	before := state(t, a, run).GetRunVersion()
	_, err = a.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft", Params: params(t, map[string]any{"reply": huge})})
	tooLarge("an agent's answer", err)
	_, err = a.client.ExecuteStep(ctx(t), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft", ParamsJson: []byte(`{"reply":"` + huge + `"}`)})
	tooLarge("an agent's answer as params_json", err)
	if v := state(t, a, run).GetRunVersion(); v != before {
		t.Errorf("a refused answer wrote the run: version %d → %d", before, v)
	}

	gate := step(t, a, run, "draft", map[string]any{"reply": "Hi."}).GetGate()
	_, err = a.client.SubmitHumanResponse(ctx(t), &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: gate.GetGateId(), Choice: strings.Repeat("s", 5000)})
	tooLarge("a gate's choice", err)
	if st := state(t, a, run); st.GetPendingGate().GetGateId() != gate.GetGateId() {
		t.Errorf("a refused choice closed the gate: %v", st.GetPendingGate())
	}

	r := start(t, a, "big", nil)
	doc := loadDoc(t, a, r.GetRunId())
	if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_FAILED || calls.Load() != 1 || len(doc.CompletedSteps) != 0 {
		t.Errorf("a handler's output past the limit: run %v, %d calls, completed %v; want the step failed and nothing recorded", r.GetRunPhase(), calls.Load(), doc.CompletedSteps)
	}
	ev, err := a.st.Evidence(ctx(t), r.GetRunId(), 0, -1)
	if err != nil || len(ev) == 0 || !strings.Contains(string(ev[len(ev)-1]), "over the limit of 1048576 bytes") || strings.Contains(string(ev[len(ev)-1]), "xxxx") {
		t.Errorf("the failed step's evidence does not say why (or holds the output): %v %s", err, ev)
	}
}

const manyOutputs = `id: many
name: Many outputs
version: 1
steps:
  a:
    description: A chunk.
    execution: auto
    handler: chunk
  b:
    description: A chunk.
    execution: auto
    handler: chunk
    depends_on: [a]
  c:
    description: A chunk.
    execution: auto
    handler: chunk
    depends_on: [b]
  d:
    description: The chunk that does not fit.
    execution: auto
    handler: chunk
    depends_on: [c]
`

// A run's outputs together are bounded (3 MiB): the output that would take
// them past it is not recorded, and its step fails saying why, rather than
// a later call breaking on gRPC's 4 MiB.
func TestARunsOutputsAreBoundedTogether(t *testing.T) {
	t.Parallel()
	a := setup(t, "redis")
	startRunner(t, a, map[string]handlerFunc{
		"chunk": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"blob": strings.Repeat("z", 900<<10)})}, nil
		},
	})
	a.register(t, []byte(manyOutputs))
	r := start(t, a, "many", nil)
	doc := loadDoc(t, a, r.GetRunId())
	if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_FAILED || strings.Join(doc.CompletedSteps, ",") != "a,b,c" || !slices.Contains(doc.FailedSteps, "d") {
		t.Fatalf("run %v, completed %v, failed %v; want a, b, c recorded and d failed", r.GetRunPhase(), doc.CompletedSteps, doc.FailedSteps)
	}
	ev, _ := a.st.Evidence(ctx(t), r.GetRunId(), 0, -1)
	if last := string(ev[len(ev)-1]); !strings.Contains(last, "the run's outputs would be") || !strings.Contains(last, "over the limit of 3145728 bytes") {
		t.Errorf("d's evidence: %s", last)
	}
	// The record still exports, through the connection every Realm client
	// makes (the bundle repeats the outputs in the evidence: past 4 MiB).
	if _, err := a.client.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: r.GetRunId()}); err != nil {
		t.Errorf("export: %v", err)
	}
}

// ListWorkflows answers a page at a time (100 by default, at most 1000), in
// id order; following next_page_token reaches every workflow exactly once,
// and pkg/client's ListAllWorkflows does that for the front doors.
func TestWorkflowsAreListedAPageAtATime(t *testing.T) {
	t.Parallel()
	a := setup(t, "miniredis")
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("w%02d", i)
		want = append(want, id)
		a.register(t, []byte(strings.ReplaceAll(bigOutput, "id: big", "id: "+id)))
	}
	var got []string
	req := &realmv1.ListWorkflowsRequest{Limit: 3}
	pages := 0
	for {
		resp, err := a.client.ListWorkflows(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(resp.GetWorkflows()) > 3 {
			t.Fatalf("a page of %d, limit 3", len(resp.GetWorkflows()))
		}
		for _, w := range resp.GetWorkflows() {
			got = append(got, w.GetId())
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("pages %d: %v, want %v in 3 pages", pages, got, want)
	}
	all, err := client.ListAllWorkflows(ctx(t), a.client)
	if err != nil || len(all.GetWorkflows()) != 7 || all.GetNextPageToken() != "" {
		t.Errorf("ListAllWorkflows: %d workflows, %v", len(all.GetWorkflows()), err)
	}
	first, _ := a.client.ListWorkflows(ctx(t), &realmv1.ListWorkflowsRequest{})
	if len(first.GetWorkflows()) != 7 || first.GetNextPageToken() != "" {
		t.Errorf("default page: %d workflows, next %q", len(first.GetWorkflows()), first.GetNextPageToken())
	}
}
