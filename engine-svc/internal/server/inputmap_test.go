package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// An auto step that builds its input with an input_map (a handler or a
// uses_service step) has its input_schema check what the map builds — the
// value its handler receives — not the run's params and not {} (seed 000,
// advance_run and execute_step; seed 001, engine_runnable).

// mappedWorkflows are the workflows these scenarios run. 'fetch' builds
// order_id from run.params; 'file' builds number from the output of
// 'parse', a step it depends on; 'routed' builds category from an agent's
// answer; 'both' puts a step refused for the run's params beside one whose
// map builds a literal its schema refuses; 'mapped_agent' puts that step
// beside an agent step that can run.
const mappedWorkflows = `id: mapped_params
name: Mapped from params
version: 1
steps:
  fetch:
    description: Fetch the order.
    execution: auto
    handler: fetch_order
    input_map:
      order_id: run.params.id
    input_schema:
      type: object
      required: [order_id]
      additionalProperties: false
      properties:
        order_id: { type: string }
---
id: mapped_output
name: Mapped from an output
version: 1
steps:
  parse:
    description: Parse the invoice.
    execution: auto
    handler: parse_invoice
  file:
    description: File the invoice.
    execution: auto
    depends_on: [parse]
    handler: file_invoice
    input_map:
      number: context.resources.parse.number
    input_schema:
      type: object
      required: [number]
      properties:
        number: { type: string }
---
id: mapped_answer
name: Mapped from an answer
version: 1
steps:
  classify:
    description: Classify the ticket.
    execution: agent
    input_schema: { type: object }
  route:
    description: Route the ticket.
    execution: auto
    depends_on: [classify]
    handler: route_ticket
    input_map:
      category: context.resources.classify.category
    input_schema:
      type: object
      properties:
        category: { enum: [billing, bug] }
---
id: mapped_both
name: Two refused
version: 1
steps:
  intake:
    description: Take the order.
    execution: auto
    input_schema:
      type: object
      required: [order]
  label:
    description: Label the order.
    execution: auto
    handler: label_order
    input_map:
      size: { $literal: 5 }
    input_schema:
      type: object
      properties:
        size: { type: string }
---
id: mapped_agent
name: Refused beside an agent step
version: 1
steps:
  label:
    description: Label the order.
    execution: auto
    handler: label_order
    input_map:
      size: { $literal: 5 }
    input_schema:
      type: object
      properties:
        size: { type: string }
  note:
    description: Note the order.
    execution: agent
    input_schema: { type: object }
`

// mappedRunner serves the scenarios' handlers and keeps what each one
// was given as inputs.params.
type mappedRunner struct {
	mu  sync.Mutex
	got map[string]map[string]any
}

func (m *mappedRunner) params(handler string) map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.got[handler]
}

func startMappedRunner(t *testing.T, e *env, parsed any) *mappedRunner {
	t.Helper()
	m := &mappedRunner{got: map[string]map[string]any{}}
	returns := func(name string, data any) handlerFunc {
		return func(_ context.Context, req *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			m.mu.Lock()
			m.got[name], _ = req.GetInputs().AsMap()["params"].(map[string]any)
			m.mu.Unlock()
			return &realmv1.ExecuteHandlerResponse{Data: value(t, data)}, nil
		}
	}
	startRunner(t, e, map[string]handlerFunc{
		"fetch_order":   returns("fetch_order", map[string]any{"fetched": true}),
		"parse_invoice": returns("parse_invoice", map[string]any{"number": parsed}),
		"file_invoice":  returns("file_invoice", map[string]any{"filed": true}),
		"route_ticket":  returns("route_ticket", map[string]any{"routed": true}),
		"label_order":   returns("label_order", map[string]any{"labelled": true}),
	})
	return m
}

func registerMapped(t *testing.T, e *env) {
	t.Helper()
	for _, doc := range strings.Split(mappedWorkflows, "---\n") {
		if r := e.register(t, []byte(doc)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
	}
}

// wayOut is the way out a reply ends with when nothing else can run.
func wayOut(ways ...string) string {
	out := "For " + ways[0]
	for _, w := range ways[1:] {
		out += "; for " + w
	}
	return out + "; then, after a fix, call advance_run; or end the run with abandon_run."
}

func TestAStepWhoseInputMapBuildsWhatItsSchemaWantsRuns(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerMapped(t, e)
		m := startMappedRunner(t, e, "INV-7")
		cases := []struct {
			name, workflow, handler string
			params                  map[string]any
			want                    string // what the handler was given, as fmt prints it
		}{
			{"the run's params are not what is checked", "mapped_params", "fetch_order", map[string]any{"id": "A-1"}, "map[order_id:A-1]"},
			{"a step with depends_on is not checked against {}", "mapped_output", "file_invoice", nil, "map[number:INV-7]"},
		}
		for _, c := range cases {
			r := start(t, e, c.workflow, c.params)
			if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
				t.Errorf("%s: start = %q (%v)", c.name, r.GetContextHint(), r.GetRunPhase())
			}
			if got := fmt.Sprint(m.params(c.handler)); got != c.want {
				t.Errorf("%s: handler given %s, want %s", c.name, got, c.want)
			}
		}
	})
}

// refusal is an engine_runnable entry's refusal of a step, as
// get_run_state gives it.
func refusal(t *testing.T, e *env, run, step string) map[string]any {
	t.Helper()
	list, _ := state(t, e, run).GetExtra().AsMap()["engine_runnable"].([]any)
	for _, x := range list {
		if m, _ := x.(map[string]any); m["step"] == step {
			return m
		}
	}
	t.Fatalf("engine_runnable has no '%s': %v", step, list)
	return nil
}

func TestAnInputMapItsSchemaRefusesGivesTheStepsOwnWayOut(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerMapped(t, e)
		m := startMappedRunner(t, e, 42.0)
		fromParams := wayOut("'fetch', start a run with params that fit, or correct its input_map or its input_schema and register the workflow again")
		fromOutput := wayOut("'file', correct its input_map or its input_schema and register the workflow again")
		cases := []struct {
			name, workflow, step string
			params               map[string]any
			refusal              string
			way                  string
			created              string // start_run's hint, with %s the run and then the way
			errors               string // error_details.errors as fmt prints them
		}{
			{
				name: "a key built from run.params, of the wrong type", workflow: "mapped_params", step: "fetch",
				params: map[string]any{"id": 7.0}, refusal: "/order_id must be string", way: fromParams,
				created: "Run '%s' created for workflow 'mapped_params'. 'fetch' cannot run (input_schema): /order_id must be string. %s",
				errors:  "[map[instancePath:/order_id keyword:type message:must be string params:map[type:string] schemaPath:#/properties/order_id/type]]",
			},
			{
				name: "a key built from run.params that found nothing", workflow: "mapped_params", step: "fetch",
				params: map[string]any{"other": "A-1"}, refusal: "must have required property 'order_id'", way: fromParams,
				created: "Run '%s' created for workflow 'mapped_params'. 'fetch' cannot run (input_schema): must have required property 'order_id'. %s",
				errors:  "[map[instancePath: keyword:required message:must have required property 'order_id' params:map[missingProperty:order_id] schemaPath:#/required]]",
			},
			{
				name: "a key built from a step's output", workflow: "mapped_output", step: "file",
				refusal: "/number must be string", way: fromOutput,
				created: "Step 'parse' completed. 'file' cannot run (input_schema): /number must be string. %[2]s",
				errors:  "[map[instancePath:/number keyword:type message:must be string params:map[type:string] schemaPath:#/properties/number/type]]",
			},
		}
		for _, c := range cases {
			// start_run's creation reply ends with the way out.
			r := start(t, e, c.workflow, c.params)
			run := r.GetRunId()
			if got, want := r.GetContextHint(), fmt.Sprintf(c.created, run, c.way); got != want {
				t.Errorf("%s: start = %q\nwant %q", c.name, got, want)
			}
			// get_run_state names the step, what refused it and why.
			got := refusal(t, e, run, c.step)
			if got["runnable_here"] != false || got["refused_by"] != "input_schema" || got["refusal"] != c.refusal {
				t.Errorf("%s: engine_runnable = %v", c.name, got)
			}
			// Called by name: an error reported to the user, with the rules
			// broken and nothing counted.
			x := step(t, e, run, c.step, nil)
			details := x.GetErrorDetails().AsMap()
			if x.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_ERROR || x.GetErrorCode() != "VALIDATION_INPUT_SCHEMA" ||
				x.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER || len(x.GetNextActions()) != 0 {
				t.Errorf("%s: execute_step = %v", c.name, x)
			}
			if fmt.Sprint(details["errors"]) != c.errors || details["rejections"] != nil || details["threshold"] != nil {
				t.Errorf("%s: error_details = %v", c.name, details)
			}
			if want := fmt.Sprintf("'%s' cannot run (input_schema): %s. %s", c.step, c.refusal, c.way); x.GetContextHint() != want {
				t.Errorf("%s: execute_step hint = %q\nwant %q", c.name, x.GetContextHint(), want)
			}
			// advance_run runs nothing and says the same.
			if a, want := advance(t, e, run), fmt.Sprintf("Run '%s': nothing ran. '%s' cannot run (input_schema): %s. %s", run, c.step, c.refusal, c.way); a.GetContextHint() != want {
				t.Errorf("%s: advance = %q\nwant %q", c.name, a.GetContextHint(), want)
			}
		}
		if got := m.params("fetch_order"); got != nil {
			t.Errorf("a refused step's handler ran with %v", got)
		}
	})
}

func TestAnAnswerThatMapsToARefusedInputEndsWithTheWayOut(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerMapped(t, e)
		startMappedRunner(t, e, "INV-7")
		run := start(t, e, "mapped_answer", nil).GetRunId()
		r := step(t, e, run, "classify", map[string]any{"category": "spam"})
		want := "Step 'classify' completed. 'route' cannot run (input_schema): /category must be equal to one of the allowed values. " +
			wayOut("'route', correct its input_map or its input_schema and register the workflow again")
		if r.GetContextHint() != want || r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK || len(r.GetNextActions()) != 0 {
			t.Errorf("answer's reply = %q (%v)\nwant %q", r.GetContextHint(), r.GetStatus(), want)
		}
	})
}

func TestStepsRefusedForTheirInputAndTheirMapGiveEachWayInOrder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerMapped(t, e)
		startMappedRunner(t, e, "INV-7")
		r := start(t, e, "mapped_both", nil)
		run := r.GetRunId()
		way := wayOut(
			"'intake', start a run with params that fit, or correct its input_schema and register the workflow again",
			"'label', correct its input_map or its input_schema and register the workflow again")
		intake := "'intake' cannot run (input_schema): must have required property 'order'."
		label := "'label' cannot run (input_schema): /size must be string."
		if want := fmt.Sprintf("Run '%s' created for workflow 'mapped_both'. %s %s %s", run, intake, label, way); r.GetContextHint() != want {
			t.Errorf("start = %q\nwant %q", r.GetContextHint(), want)
		}
		// The step called names its own refusal first, then the other's;
		// the ways keep the workflow's order.
		x := step(t, e, run, "label", nil)
		if want := fmt.Sprintf("%s %s %s", label, intake, way); x.GetContextHint() != want || x.GetErrorCode() != "VALIDATION_INPUT_SCHEMA" {
			t.Errorf("execute_step = %q (%s)\nwant %q", x.GetContextHint(), x.GetErrorCode(), want)
		}
		if got := refusal(t, e, run, "label"); got["refused_by"] != "input_schema" || got["refusal"] != "/size must be string" {
			t.Errorf("engine_runnable = %v", got)
		}
	})
}

func TestARefusedMapBesideAStepThatCanRunPointsAtThatStep(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerMapped(t, e)
		startMappedRunner(t, e, "INV-7")
		run := start(t, e, "mapped_agent", nil).GetRunId()
		x := step(t, e, run, "label", nil)
		want := "'label' cannot run (input_schema): /size must be string. Ready for the agent: 'note'."
		if x.GetContextHint() != want || x.GetErrorCode() != "VALIDATION_INPUT_SCHEMA" ||
			x.GetAgentAction() != realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER || fmt.Sprint(tools(x)) != "[execute_step:note]" {
			t.Errorf("execute_step = %q %s %v %v\nwant %q", x.GetContextHint(), x.GetErrorCode(), x.GetAgentAction(), tools(x), want)
		}
	})
}

// A uses_service step builds its input the same way: its schema checks the
// params its adapter is called with.
func TestAServiceStepsSchemaChecksWhatItsAdapterIsCalledWith(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		a := startAdapterRunner(t, e, "http", func(*realmv1.CallAdapterRequest) *realmv1.CallAdapterResponse {
			return &realmv1.CallAdapterResponse{Data: value(t, map[string]any{"data": map[string]any{"id": "c-1"}})}
		})
		wf := strings.NewReplacer("id: crm", "id: crm_mapped", "email: run.params.email", "contact: run.params.email").Replace(fmt.Sprintf(crm,
			"    input_schema:\n      type: object\n      required: [contact]\n      properties:\n        contact: { type: string }\n"))
		if r := e.register(t, []byte(wf)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
		r := start(t, e, "crm_mapped", map[string]any{"email": "ana@x"})
		a.mu.Lock()
		called := a.last.GetParams().AsMap()
		a.mu.Unlock()
		if r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || fmt.Sprint(called) != "map[contact:ana@x]" {
			t.Errorf("start = %q; adapter called with %v", r.GetContextHint(), called)
		}
		refused := start(t, e, "crm_mapped", map[string]any{"mail": "ana@x"})
		want := fmt.Sprintf("Run '%s' created for workflow 'crm_mapped'. 'add_contact' cannot run (input_schema): must have required property 'contact'. %s", refused.GetRunId(),
			wayOut("'add_contact', start a run with params that fit, or correct its input_map or its input_schema and register the workflow again"))
		if refused.GetContextHint() != want {
			t.Errorf("start = %q\nwant %q", refused.GetContextHint(), want)
		}
	})
}
