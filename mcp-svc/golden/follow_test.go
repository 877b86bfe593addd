package golden

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// answerFor makes an answer that fits a schema, the way a careful model
// would: the first value of an enum, the largest number allowed, a short
// text, one item per list.
func answerFor(schema any) any {
	s, _ := schema.(map[string]any)
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch s["type"] {
	case "number", "integer":
		if m, ok := s["maximum"].(float64); ok {
			return m
		}
		if m, ok := s["minimum"].(float64); ok {
			return m + 1
		}
		return 1.0
	case "boolean":
		return true
	case "array":
		return []any{answerFor(s["items"])}
	case "object":
		props, _ := s["properties"].(map[string]any)
		out := map[string]any{}
		for name, p := range props {
			out[name] = answerFor(p)
		}
		return out
	}
	return "An answer."
}

// follow drives a run by doing only what each reply's next_actions says,
// until nothing can be called. It answers a question with the first choice
// offered. It returns the last reply.
func (st *stack) follow(r map[string]any) map[string]any {
	st.t.Helper()
	for i := 0; i < 50; i++ {
		actions, _ := r["next_actions"].([]any)
		if len(actions) == 0 {
			return r
		}
		a := actions[0].(map[string]any)
		in := a["instruction"].(map[string]any)
		args := in["call_with"].(map[string]any)
		switch in["tool"] {
		case "execute_step":
			args["params"] = answerFor(a["input_schema"])
		case "submit_human_response":
			choice := strings.Trim(args["choice"].(string), "<>")
			args["choice"] = strings.Split(choice, "|")[0]
		}
		r = st.call(in["tool"].(string), args)
	}
	st.t.Fatalf("run did not end after 50 calls: %s", pretty(r))
	return nil
}

// A client that follows only next_actions finishes every example workflow
// (issue 3's done-when), gates included.
func TestEveryExampleFinishesFollowingOnlyNextActions(t *testing.T) {
	t.Parallel()
	paths, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if len(paths) < 4 {
		t.Fatalf("found %d examples", len(paths))
	}
	params := map[string]map[string]any{
		"triage":              {"subject": "Double charge", "body": "I was charged twice."},
		"refund":              {"request": "Please refund the 20 EUR I paid twice."},
		"orders":              {"order": "A-17", "quantity": 4},
		"lease-quotes":        {"text": "The rent is paid quarterly in advance."},
		"support-reply":       {"ticket": "I was charged twice."},
		"github-issues":       {"title": "Crash on start", "number": 42},
		"invoice-notes":       {"question": "What is the total of invoice 7?"},
		"github-pr-review":    {"repo": "octo/app", "pr_number": 7},
		"slack-deploy-notice": {"channel": "#deploys", "version": "v2.4.0", "notes": "Faster search."},
	}
	eachBackend(t, func(t *testing.T, backend string) {
		st := newStack(t, backend)
		st.serveOrderTotal()
		for _, p := range paths {
			yaml, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			id := strings.TrimSuffix(filepath.Base(p), ".yaml")
			st.register(yaml)
			end := st.follow(st.start(id, params[id]))
			phase, _ := end["run_phase"].(string)
			if id == "support-reply" {
				// The gate was answered by following its next action, and
				// its first choice sends the reply.
				s := st.call("get_run_state", map[string]any{"run_id": runID(end)})
				if fmt.Sprint(s["completed_steps"]) != "[classify draft send]" {
					t.Errorf("support-reply steps: %s", pretty(s))
				}
			}
			if phase != "completed" && phase != "aborted" {
				t.Errorf("%s ended in %q: %s", id, phase, pretty(end))
			}
			s := st.call("get_run_state", map[string]any{"run_id": runID(end)})
			if s["terminal_state"] != true {
				t.Errorf("%s: run is not over: %s", id, pretty(s))
			}
		}
	})
}

// The seed's lease-quotes workflow through MCP: a quote that is in the
// document completes the run; one that is not makes the guard abort it.
func TestLeaseQuotesThroughMCP(t *testing.T) {
	t.Parallel()
	doc := "The tenant shall pay a rent of €1,200 per month. The rent is paid quarterly in advance."
	eachBackend(t, func(t *testing.T, backend string) {
		st := newStack(t, backend)
		yaml, err := os.ReadFile(filepath.Join("..", "..", "examples", "lease-quotes.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		st.register(yaml)
		for quote, want := range map[string]string{
			"The rent is paid quarterly in advance.": "Guard step 'stop_if_not_found' passed and completed the run.",
			"The rent is paid monthly.":              "Guard step 'stop_if_not_found' aborted the run.",
		} {
			run := runID(st.start("lease-quotes", map[string]any{"text": doc}))
			r := st.execute(run, "extract_fields", map[string]any{"fields": []any{map[string]any{"field": "payment", "value": "quarterly", "quote": quote}}})
			if r["context_hint"] != want {
				t.Errorf("quote %q: %s", quote, pretty(r))
			}
		}
	})
}

// Twenty start_run calls with one idempotency key, at once, over MCP: one
// run, and every reply names it.
func TestConcurrentKeyedStartsOverMCPMakeOneRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, backend string) {
		st := newStack(t, backend, "triage")
		ids := make([]string, 20)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := st.s.CallTool(testCtx(t), &mcp.CallToolParams{Name: "start_run", Arguments: map[string]any{
					"workflow_id": "triage", "params": map[string]any{"ticket": 7}, "idempotency_key": "ticket-7"}})
				if err != nil || res.IsError {
					t.Errorf("start_run: %v %v", err, res)
					return
				}
				ids[i] = between(res.Content[0].(*mcp.TextContent).Text, `"run_id":"`, `"`)
			}()
		}
		wg.Wait()
		for _, id := range ids {
			if id == "" || id != ids[0] {
				t.Fatalf("run ids: %v", ids)
			}
		}
	})
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	j := strings.Index(s, b)
	if j < 0 {
		return ""
	}
	return s[:j]
}

// register registers a workflow with the engine behind the stack.
func (st *stack) register(yaml []byte) {
	st.t.Helper()
	resp, err := st.eng.RegisterWorkflow(testCtx(st.t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: yaml}})
	if err != nil || !resp.GetRegistered() {
		st.t.Fatalf("register: %v %s", err, resp.GetReport().GetText())
	}
}

// cannedAdapter answers each operation with fixed data: a stand-in for
// the outside service behind an example's catalog adapter (the adapters
// themselves are tested against API stubs in services/adapter-runner).
type cannedAdapter map[string]map[string]any

func (c cannedAdapter) Call(_ context.Context, call runner.AdapterCall) (any, error) {
	data, ok := c[call.Operation]
	if !ok {
		return nil, fmt.Errorf("no answer for operation '%s'", call.Operation)
	}
	return map[string]any{"status": 200, "data": data}, nil
}

// exampleServices are the adapters examples/github-pr-review.yaml and
// examples/slack-deploy-notice.yaml call.
var exampleServices = map[string]runner.Adapter{
	"github": cannedAdapter{
		"get_pr_diff":  {"repo": "octo/app", "pr_title": "Retry the ledger sync", "base_branch": "main", "head_sha": "6dcb09b", "files_changed": []any{"sync/ledger.go"}, "diff_text": "+// Retry once."},
		"post_comment": {"id": 901, "body": "Looks fine."},
	},
	"slack": cannedAdapter{
		"post_message": {"ok": true, "channel": "C0123", "ts": "1700000000.000101"},
		"post_reply":   {"ok": true, "channel": "C0123", "ts": "1700000000.000102"},
		"add_reaction": {"ok": true, "already_reacted": false},
	},
}

// serveOrderTotal starts a handler runner (pkg/runner) serving the
// example's order_total, and stand-ins for the github and slack adapters
// the examples call, registered with the stack's engine, and waits until
// the engine's registry lists it.
func (st *stack) serveOrderTotal() {
	st.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	total := handler.Func(func(_ context.Context, in handler.Inputs, sc handler.StepContext) (handler.Result, error) {
		q, _ := in.Params["quantity"].(float64)
		price, _ := sc.Config["unit_price"].(float64)
		return handler.Data(map[string]any{"total": q * price}), nil
	})
	go func() {
		done <- runner.Serve(ctx, runner.Options{Name: "test-runner", EngineAddr: st.addr, Lease: 10 * time.Second, Adapters: exampleServices},
			runner.Registration{Name: "order_total", Handler: total})
	}()
	st.t.Cleanup(func() { cancel(); <-done })
	reg := realmv1.NewRegistryServiceClient(st.conn)
	for i := 0; i < 300; i++ {
		caps, err := reg.ListCapabilities(testCtx(st.t), &realmv1.ListCapabilitiesRequest{})
		if err == nil && len(caps.GetRunners()) > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	st.t.Fatal("the runner did not register")
}
