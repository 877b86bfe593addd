package server_test

import (
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A bad trigger block is refused by ValidateWorkflow and RegisterWorkflow
// over gRPC (what `realm workflow validate` and `register` call), in
// listen §4.1's words with the line of the field at fault, and nothing is
// registered — before listen-svc ever loads it.
func TestBadTriggerFieldsAreRefusedAtValidateWithTheirLine(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	const head = "id: hooked\nname: Hooked\nversion: 1\ntrigger:\n  type: webhook\n"
	const steps = "steps:\n  a:\n    description: A\n    execution: auto\n"
	for _, c := range []struct{ trigger, want string }{
		{"  auth:\n    mode: bogus\n", "trigger/auth/mode must be equal to one of the allowed values (line 7)"},
		{"  auth:\n    mode: github\n", "trigger/auth: missing required property 'secret_from' (line 6)"},
		{"  auth: { mode: none }\n  path: hooks/x\n", `trigger/path must match pattern "^/" (line 7)`},
		{"  auth: { mode: none }\n  rate_limit: { per_second: -1 }\n", "trigger/rate_limit/per_second must be > 0 (line 7)"},
		{"  auth: { mode: none }\n  filter:\n    all:\n      - { header: x-event, value: push }\n      - { path: a, header: b, value: c }\n",
			"trigger/filter/all/1: must have exactly one of 'header' or 'path' (line 10)"},
		{"  auth: { mode: none }\n  dedup: { id_from: header.x-id, on_missing_id: drop }\n", "trigger/dedup/on_missing_id must be equal to one of the allowed values (line 7)"},
	} {
		src := &realmv1.WorkflowSource{Yaml: []byte(head + c.trigger + steps), Path: "hooked.yaml"}
		v, err := e.client.ValidateWorkflow(ctx(t), &realmv1.ValidateWorkflowRequest{Source: src})
		if err != nil {
			t.Fatal(err)
		}
		if v.GetReport().GetValid() || !strings.Contains(strings.Join(v.GetReport().GetErrors(), "\n"), c.want) {
			t.Errorf("validate: errors %q, want %q", v.GetReport().GetErrors(), c.want)
		}
		r, err := e.client.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: src})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetRegistered() || !strings.Contains(r.GetReport().GetText(), c.want) {
			t.Errorf("register: registered %v, report %q, want %q", r.GetRegistered(), r.GetReport().GetText(), c.want)
		}
	}
	l, err := e.client.ListWorkflows(ctx(t), &realmv1.ListWorkflowsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range l.GetWorkflows() {
		if w.GetId() == "hooked" {
			t.Errorf("a refused workflow was registered: %v", w)
		}
	}
}
