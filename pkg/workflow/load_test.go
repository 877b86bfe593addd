package workflow

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// header is 4 lines, so the first step key is on line 5 and its fields
// start on line 6.
const header = "id: w\nname: W\nversion: 1\nsteps:\n"

func setup(t *testing.T, src string, opts ...LoadOptions) (*Definition, *Report) {
	t.Helper()
	var o LoadOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	d, r := Load([]byte(src), o)
	if r == nil {
		t.Fatal("Load returned a nil report")
	}
	if (d != nil) != r.Valid {
		t.Fatalf("definition presence (%v) disagrees with Valid (%v)", d != nil, r.Valid)
	}
	return d, r
}

func diagMessages(r *Report) []string {
	out := make([]string, len(r.Diagnostics))
	for i, d := range r.Diagnostics {
		out[i] = d.Message
	}
	return out
}

// TestLoadRefusesWithPublishedMessages has one case per refusal the spec
// publishes (exact text, placeholders filled in).
func TestLoadRefusesWithPublishedMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		src  string
		want string
	}{
		{"missing id", "name: W\nversion: 1\nsteps: {}\n", "Missing required field: 'id'"},
		{"missing name", "id: w\nversion: 1\nsteps: {}\n", "Missing required field: 'name'"},
		{"missing version", "id: w\nname: W\nsteps: {}\n", "Missing required field: 'version'"},
		{"missing steps", "id: w\nname: W\nversion: 1\n", "Missing required field: 'steps'"},
		{"quoted version", "id: w\nname: W\nversion: '1'\nsteps: {}\n", "'version' must be a number (line 3)"},
		{"steps as a list", header + "  - a\n", "'steps' must be a non-null object"},
		{"steps null", header, "'steps' must be a non-null object"},
		{"reserved step name run", header + "  run:\n    description: R\n    execution: auto\n",
			"Step name 'run' is reserved and cannot be used as a step identifier (step at line 5)"},
		{"reserved step name $settlement", header + "  $settlement:\n    description: R\n    execution: auto\n",
			"Step name '$settlement' is reserved and cannot be used as a step identifier (step at line 5)"},
		{"timeout on agent", header + "  a:\n    description: A\n    execution: agent\n    timeout_seconds: 30\n",
			"Step 'a': 'timeout_seconds' is not valid on execution: agent steps — the engine never enforces it there (agent dispatch is never wrapped in a timeout), so the step would LOOK time-bounded while nothing enforced the bound. In realm's own drive the model request is bounded by 'llm_timeout_seconds' (or --llm-timeout) and tool calls by 'tool_timeout'. (line 8)"},
		{"missing description", header + "  a:\n    execution: auto\n",
			"Step 'a': missing required field 'description' (step at line 5)"},
		{"invalid execution", header + "  a:\n    description: A\n    execution: robot\n",
			"Step 'a': invalid execution value 'robot'; must be 'auto', 'agent', 'guard', or 'finalizer' (step at line 5)"},
		{"guard without abort_unless", header + "  g:\n    description: G\n    execution: guard\n",
			"Step 'g': execution: guard requires 'abort_unless' (step at line 5)"},
		{"finalizer without on_outcome", header + "  f:\n    description: F\n    execution: finalizer\n    handler: h\n",
			"Step 'f': execution: finalizer requires 'on_outcome' (step at line 5)"},
		{"finalizer without handler", header + "  f:\n    description: F\n    execution: finalizer\n    on_outcome: always\n",
			"Step 'f': execution: finalizer requires 'handler' (handler-only in v1) (step at line 5)"},
		{"unknown service", header + "  a:\n    description: A\n    execution: auto\n    uses_service: ledger\n",
			"Step 'a': uses_service 'ledger' is not defined in 'services' (step at line 5)"},
		{"service unknown key", "id: w\nname: W\nversion: 1\nservices:\n  disk: { adapter: filesystem, auth: x }\nsteps: {}\n",
			"Service 'disk': unknown key 'auth'"},
		{"when on a step outside depends_on", header + "  a:\n    description: A\n    execution: auto\n  b:\n    description: B\n    execution: auto\n    depends_on: [a]\n    when: \"context.resources.a.x == 1\"\n",
			"Step 'b': 'when' references step 'context' which is not in its depends_on [a]. Add it to depends_on or use 'run.params.*'. (step at line 8)"},
		{"when with and", header + "  a:\n    description: A\n    execution: auto\n  b:\n    description: B\n    execution: auto\n    depends_on: [a]\n    when: \"a.x == 1 and a.y == 2\"\n",
			"Step 'b': 'when' uses unsupported 'and' — write it as a list:\n  when:\n    - \"a.x == 1\"\n    - \"a.y == 2\" (step at line 8)"},
		{"settlement failed under all_success", header + "  a:\n    description: A\n    execution: auto\n  b:\n    description: B\n    execution: auto\n    depends_on: [a]\n    when: '$settlement.a.failed == true'\n",
			"Step 'b': 'when' condition \"$settlement.a.failed == true\" can never be true — under the default 'all_success' trigger rule, 'a' can never be in failed_steps when this step is evaluated (the rule skips this step as soon as a dependency fails, before 'when' is read). To run this step when 'a' fails, set trigger_rule to one of: all_done, one_failed, all_failed. (step at line 8)"},
		{"preconditions as a string", header + "  a:\n    description: A\n    execution: auto\n    preconditions: 'run.params.x > 1'\n",
			"Step 'a': 'preconditions' must be an array of strings (line 8)"},
		{"precondition path alone", header + "  a:\n    description: A\n    execution: auto\n  b:\n    description: B\n    execution: auto\n    depends_on: [a]\n    preconditions: ['a.ready']\n",
			"Step 'b': precondition 'a.ready' must be a comparison (e.g. \"step.field >= 1\"). (step at line 8)"},
		{"empty when list", header + "  a:\n    description: A\n    execution: auto\n    when: []\n",
			"Step 'a': 'when' array must not be empty (line 8)"},
		{"trust typo", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirm\n",
			"Step 'a': 'trust: \"human_confirm\"' is not a recognized value — refused at load: this workflow cannot create a run while the value is wrong, so no step of it — gated or not — ever executes under it. A step's 'trust' accepts auto, human_confirmed, human_reviewed. Did you mean 'human_confirmed'? Correct the value, or remove 'trust' for a step without a gate. (line 8)"},
		{"empty gate choices", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate:\n      choices: []\n",
			"Step 'a': 'gate.choices', when declared, must be non-empty — an empty list leaves the gate with no answer anyone could give. Declare at least one choice, or remove the key to fall back to 'input_schema.properties.choice.enum' or the default pair (approve/reject). (line 10)"},
		{"gate timeout not positive", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate: { timeout_seconds: 0 }\n",
			"Step 'a': 'gate.timeout_seconds' must be a positive integer (step at line 5)"},
		{"gate on_expiry value", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate:\n      on_expiry: later\n",
			"Step 'a': 'gate.on_expiry' must be 'settle_default' or 'abort' (got: \"later\") (line 10)"},
		{"settle_default without default_choice", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate: { timeout_seconds: 60, on_expiry: settle_default }\n",
			"Step 'a': 'gate.on_expiry: settle_default' requires 'gate.default_choice' (nothing to resolve the gate with on expiry) (step at line 5)"},
		{"default_choice outside choices", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate: { choices: [pay, hold], timeout_seconds: 60, on_expiry: settle_default, default_choice: wait }\n",
			"Step 'a': 'gate.default_choice' (\"wait\") is not one of the step's effective choices: pay, hold (step at line 5)"},
		{"exhaustion default without default_output", header + "  a:\n    description: A\n    execution: agent\n    output_schema: { type: object }\n    validation_exhaustion: { mode: default }\n",
			"Step 'a': 'validation_exhaustion.mode: default' requires 'default_output' (nothing to substitute on exhaustion) (step at line 5)"},
		{"default_output without output_schema", header + "  a:\n    description: A\n    execution: agent\n    input_schema: { type: object }\n    validation_exhaustion: { mode: default, default_output: {} }\n",
			"Step 'a': 'validation_exhaustion.default_output' requires the step to declare 'output_schema' (an undeclared schema makes the default unvalidatable) (step at line 5)"},
		{"on_timeout without idempotent", header + "  a:\n    description: A\n    execution: auto\n    timeout_seconds: 5\n    retry: { max_attempts: 2, on_timeout: true }\n",
			"Step 'a': 'retry.on_timeout: true' requires 'idempotent: true' declared on the step — a timeout-retry can run concurrently with the still-in-flight original attempt, so the step must explicitly attest that any partial prior application is harmless to re-apply. Declare 'idempotent: true' or remove 'on_timeout'. (step at line 5)"},
		{"retry max_attempts zero", header + "  a:\n    description: A\n    execution: auto\n    retry:\n      max_attempts: 0\n",
			"Step 'a': 'retry.max_attempts' must be a positive integer (line 9)"},
		{"id with a control character", "id: \"a\\x1fb\"\nname: T\nversion: 1\nsteps:\n  a:\n    description: A\n    execution: auto\n",
			"'id' must not contain control characters (line 1)"},
		{"retry max_attempts past the bound", header + "  a:\n    description: A\n    execution: auto\n    retry:\n      max_attempts: 2147483647\n",
			"Step 'a': 'retry.max_attempts' must be at most 100 (got 2147483647) (line 9)"},
		{"retry backoff value", header + "  a:\n    description: A\n    execution: auto\n    retry:\n      backoff: random\n",
			"Step 'a': 'retry.backoff' must be 'fixed', 'linear', or 'exponential' (line 9)"},
		{"retry negative base delay", header + "  a:\n    description: A\n    execution: auto\n    retry:\n      base_delay_ms: -1\n",
			"Step 'a': 'retry.base_delay_ms' must be a non-negative number (line 9)"},
		{"timeout_seconds not positive", header + "  a:\n    description: A\n    execution: auto\n    timeout_seconds: 0\n",
			"Step 'a': 'timeout_seconds' must be a positive integer (line 8)"},
		{"context_wrapper value", "id: w\nname: W\nversion: 1\ncontext_wrapper: html\nsteps: {}\n",
			"'context_wrapper' must be 'xml', 'brackets', or 'none' (found: 'html') (line 4)"},
		{"context entry with hyphen", "id: w\nname: W\nversion: 1\nworkflow_context:\n  house-style: { source: { path: a.md } }\nsteps: {}\n",
			"workflow_context entry 'house-style' must match [\\w.]+ (underscores and dots only — no hyphens) (line 5)"},
		{"context entry ending .raw", "id: w\nname: W\nversion: 1\nworkflow_context:\n  style.raw: { source: { path: a.md } }\nsteps: {}\n",
			"workflow_context entry 'style.raw' must not end with '.raw' (line 5)"},
		{"context entry without path", "id: w\nname: W\nversion: 1\nworkflow_context:\n  style: { description: x }\nsteps: {}\n",
			"workflow_context.style.source.path is required (line 5)"},
		{"extensions empty list", "id: w\nname: W\nversion: 1\nextensions: []\nsteps: {}\n",
			"'extensions' must be a non-empty module path or a non-empty array of module paths (e.g. extensions: ./dist/registry.js) (line 4)"},
		{"extensions absolute", "id: w\nname: W\nversion: 1\nextensions: /opt/ext.mjs\nsteps: {}\n",
			"'extensions' entry '/opt/ext.mjs' is an absolute path — extension modules must be declared RELATIVE to the workflow directory (e.g. ../dist/registry.js)"},
		{"input_map bare list", header + "  a:\n    description: A\n    execution: auto\n    input_map:\n      ids: [1, 2]\n",
			"Step 'a': input_map path \"ids\": expected a string or object, got array (step at line 5)"},
		{"input_map unknown directive", header + "  a:\n    description: A\n    execution: auto\n    input_map:\n      meta: { $lit: x }\n",
			"Step 'a': input_map path \"meta.$lit\": unknown directive '$lit' — supported directives: $literal. Did you mean '$literal'? To pass literal data containing $-keys, wrap the subtree in $literal. input_map values are context paths, nested maps, or $literal — templated strings are not supported. (step at line 5)"},
		{"input_map literal with siblings", header + "  a:\n    description: A\n    execution: auto\n    input_map:\n      meta: { $literal: x, other: y }\n",
			"Step 'a': input_map path \"meta\": $literal node must have exactly one key ($literal); found sibling keys (step at line 5)"},
		{"template without prefix", "id: w\nname: W\nversion: 1\ntemplates:\n  t:\n    steps:\n      s: { description: S, execution: auto }\nsteps:\n  use:\n    use_template: t\n",
			"Step 'use': use_template requires a non-empty 'prefix' (step at line 9)"},
		{"template missing param", "id: w\nname: W\nversion: 1\ntemplates:\n  t:\n    params: { subject: { required: true } }\n    steps:\n      s: { description: S, execution: auto }\nsteps:\n  use:\n    use_template: t\n    prefix: p\n",
			"Step 'use': template 't' requires param 'subject' (step at line 10)"},
		{"unknown template", header + "  use:\n    use_template: nope\n    prefix: p\n",
			"Step 'use': use_template references unknown template 'nope' (step at line 5)"},
		{"null schema", header + "  a:\n    description: A\n    execution: agent\n    input_schema:\n",
			"Step 'a': 'input_schema' is null, not a schema (a JSON-Schema block is an object, or the boolean true/false); write a schema under 'input_schema', or remove it. (line 8)"},
		{"depends_on unknown step", header + "  a:\n    description: A\n    execution: auto\n    depends_on: [ghost]\n",
			"Step 'a': depends_on references unknown step 'ghost' (line 8)"},
		{"depends_on itself", header + "  a:\n    description: A\n    execution: auto\n    depends_on:\n      - a\n",
			"Step 'a': depends_on lists the step itself — a step cannot wait for its own settlement (line 9)"},
		{"settlement beyond one hop", header + "  a:\n    description: A\n    execution: auto\n  b:\n    description: B\n    execution: auto\n    depends_on: [a]\n  c:\n    description: C\n    execution: auto\n    depends_on: [b]\n    trigger_rule: all_done\n    when: '$settlement.a.failed == true'\n",
			"Step 'c': 'when' condition \"$settlement.a.failed == true\": '$settlement' paths must reference a direct dependency (one-hop rule) — 'a' is not in its depends_on [b]. (step at line 12)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, r := setup(t, tc.src)
			if d != nil || r.Valid {
				t.Fatalf("file accepted; want refusal %q", tc.want)
			}
			if !slices.Contains(r.Errors, tc.want) {
				t.Fatalf("errors do not contain\n  %q\ngot:\n  %s", tc.want, strings.Join(r.Errors, "\n  "))
			}
		})
	}
}

// TestLoadRefusesFieldsAKindDoesNotAccept walks the 'no' cells of the
// field × kind matrix.
func TestLoadRefusesFieldsAKindDoesNotAccept(t *testing.T) {
	t.Parallel()
	values := map[string]string{
		"depends_on": "[x]", "trigger_rule": "all_done", "when": "run.params.a", "preconditions": "['run.params.a == 1']",
		"uses_service": "s", "service_method": "fetch", "operation": "op", "input_map": "{ a: run.params.a }",
		"handler": "h", "timeout_seconds": "5", "retry": "{ max_attempts: 2 }", "idempotent": "true",
		"agent_profile": "p", "input_schema": "{ type: object }", "output_schema": "{ type: object }",
		"structured_output": "strict", "validation_exhaustion": "{ threshold: 2 }", "llm_timeout_seconds": "5",
		"tools": "['s:t']", "tool_timeout": "5", "trace_schema": "{ type: array }", "trace_validation_mode": "warn",
		"trust": "auto", "abort_unless": "run.params.a", "abort_message": "m", "on_outcome": "always",
	}
	for field, cells := range matrix {
		for i, k := range kinds {
			if cells[i] != no {
				continue
			}
			t.Run(field+"/"+string(k), func(t *testing.T) {
				t.Parallel()
				src := header + "  s:\n    description: S\n    execution: " + string(k) + "\n    " + field + ": " + values[field] + "\n"
				_, r := setup(t, src)
				prefix := "Step 's': '" + field + "' is not valid on execution: " + string(k) + " steps — "
				for _, e := range r.Errors {
					if strings.HasPrefix(e, prefix) && strings.HasSuffix(e, " (line 8)") {
						return
					}
				}
				t.Fatalf("no refusal %q… (line 8); errors:\n  %s", prefix, strings.Join(r.Errors, "\n  "))
			})
		}
	}
}

// TestLoadWarnsWithPublishedMessages covers the warning codes whose text the
// spec publishes.
func TestLoadWarnsWithPublishedMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, code, want string
	}{
		{"on_timeout with one attempt", header + "  a:\n    description: A\n    execution: auto\n    timeout_seconds: 5\n    idempotent: true\n    retry: { on_timeout: true }\n",
			"ON_TIMEOUT_SINGLE_ATTEMPT", "Step 'a': 'retry.on_timeout: true' has no effect with an effective 'max_attempts' of 1 — there is no second attempt to retry into. (line 10)"},
		{"retry on an agent step", header + "  a:\n    description: A\n    execution: agent\n    retry: { max_attempts: 2 }\n",
			"RETRY_INERT_NON_AUTO", "Step 'a': 'retry' is inert on execution: 'agent' steps — the built-in dispatch path never throws for agent steps, so this block can never mint a second attempt here (for schema-repair budgets, use the CLI drive's '--schema-retries' flag instead). An embedder-supplied throwing dispatcher may still consume this config — a deliberate public-API capability, not an invalid one. (line 8)"},
		{"unknown retry key", header + "  a:\n    description: A\n    execution: auto\n    timeout_seconds: 5\n    retry:\n      colour: red\n",
			"UNKNOWN_RETRY_KEY", "Step 'a': retry: unknown key 'colour' (line 10) — ignored (not a recognized retry field)."},
		{"retry without timeout", header + "  a:\n    description: A\n    execution: auto\n    retry: { max_attempts: 2 }\n",
			"RETRY_NO_TIMEOUT", "Step 'a': declares 'retry' but no 'timeout_seconds' — each attempt is bounded by the default execution timeout (3600s), so a hung attempt holds the step for an hour before the next one starts; set 'timeout_seconds' to bound each attempt. (line 8)"},
		{"inert gate block", header + "  a:\n    description: A\n    execution: auto\n    gate: { choices: [a, b] }\n",
			"DEAD_GATE_CONFIG", "Step 'a': the 'gate:' block is inert — this step declares no gate trust, so no gate ever opens; set 'trust: human_confirmed', or remove 'gate:'. (line 8)"},
		{"on_expiry without timeout", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate:\n      on_expiry: abort\n",
			"DEAD_GATE_CONFIG", "Step 'a': 'gate.on_expiry' is ignored without 'gate.timeout_seconds' — set a timeout, or remove 'gate.on_expiry'. (line 10)"},
		{"default_choice without settle_default", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate:\n      default_choice: approve\n",
			"DEAD_GATE_CONFIG", "Step 'a': 'gate.default_choice' is ignored without 'gate.on_expiry: settle_default' — set it, or remove 'gate.default_choice'. (line 10)"},
		{"reminder after expiry", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate:\n      timeout_seconds: 60\n      reminder_seconds: 60\n",
			"DEAD_GATE_CONFIG", "Step 'a': 'gate.reminder_seconds' (60) >= 'gate.timeout_seconds' (60) — the first reminder would never fire before the gate expires. (line 11)"},
		{"unknown gate key", header + "  a:\n    description: A\n    execution: auto\n    trust: human_confirmed\n    gate:\n      choice: [a]\n",
			"UNKNOWN_GATE_KEY", "Step 'a': gate: unknown key 'choice' (line 10) — ignored (did you mean 'choices'?)"},
		{"dead default_output", header + "  a:\n    description: A\n    execution: agent\n    output_schema: { type: object }\n    validation_exhaustion: { default_output: {} }\n",
			"DEAD_VALIDATION_EXHAUSTION_CONFIG", "Step 'a': 'validation_exhaustion.default_output' is ignored without 'validation_exhaustion.mode: default' — set it, or remove 'default_output'. (line 9)"},
		{"both schemas", header + "  a:\n    description: A\n    execution: agent\n    input_schema: { type: object }\n    output_schema: { type: object }\n",
			"DUAL_SCHEMA_DECLARED", "Step 'a': declares both 'input_schema' and 'output_schema' — every answer must fit both; declare one schema unless both checks are intended. (line 9)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, r := setup(t, tc.src)
			if d == nil {
				t.Fatalf("warning-only file refused:\n%s", r.Text())
			}
			for _, dg := range r.Diagnostics {
				if dg.Code == tc.code && dg.Message == tc.want {
					if dg.Severity != SeverityWarning {
						t.Fatalf("severity %q, want warning", dg.Severity)
					}
					if !strings.Contains(r.Text(), "⚠ "+tc.want+"\n") {
						t.Fatalf("text lacks the warning line:\n%s", r.Text())
					}
					return
				}
			}
			t.Fatalf("no %s %q; diagnostics:\n  %s", tc.code, tc.want, strings.Join(diagMessages(r), "\n  "))
		})
	}
}

func TestLoadEscalatesUnknownStepKeyWithSuggestion(t *testing.T) {
	t.Parallel()
	src := header + "  parse:\n    description: P\n    execution: auto\n    timeout: 5\n"
	d, r := setup(t, src)
	if d != nil {
		t.Fatal("unknown step key accepted")
	}
	want := "⚠ step 'parse': unknown key 'timeout' (line 8) — ignored (did you mean 'timeout_seconds'?)\n" +
		"Invalid: 1 warning, 1 escalated to an error by policy: UNKNOWN_STEP_KEY 'timeout'\n"
	if got := r.Text(); got != want {
		t.Fatalf("text:\n%s\nwant:\n%s", got, want)
	}
	dg := r.Diagnostics[0]
	if dg.Code != "UNKNOWN_STEP_KEY" || dg.Severity != SeverityError || dg.Scope != "step" || dg.Step != "parse" ||
		dg.Key != "timeout" || dg.DidYouMean != "timeout_seconds" || dg.Line != 8 || dg.Column != 5 || dg.EndColumn != 12 {
		t.Fatalf("diagnostic %+v", dg)
	}
}

func TestLoadEscalatesUnknownWorkflowKey(t *testing.T) {
	t.Parallel()
	_, r := setup(t, "id: w\nname: W\nversion: 1\nowner: me\nsteps: {}\n")
	want := "⚠ workflow 'w': unknown key 'owner' (line 4) — ignored (not a recognized workflow field).\n" +
		"Invalid: 1 warning, 1 escalated to an error by policy: UNKNOWN_WORKFLOW_KEY 'owner'\n"
	if got := r.Text(); got != want {
		t.Fatalf("text:\n%s\nwant:\n%s", got, want)
	}
	_, r = setup(t, "id: w\nname: W\nversion: 1\ndescriptoin: x\nsteps: {}\n")
	if r.Diagnostics[0].DidYouMean != "description" {
		t.Fatalf("did_you_mean = %q", r.Diagnostics[0].DidYouMean)
	}
}

func TestLoadTreatsRealmWrittenFieldsAsUnknownKeys(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"source_dir", "trust_root", "resolved_profiles", "schema_version", "origin", "model", "agent"} {
		_, r := setup(t, "id: w\nname: W\nversion: 1\n"+k+": x\nsteps: {}\n")
		if r.Valid || len(r.Diagnostics) != 1 || r.Diagnostics[0].Code != "UNKNOWN_WORKFLOW_KEY" || r.Diagnostics[0].Key != k {
			t.Fatalf("%s: diagnostics %+v", k, r.Diagnostics)
		}
	}
}

func TestLoadRefusesUnknownKeysOnStepsIncludingExtensionKeys(t *testing.T) {
	t.Parallel()
	_, r := setup(t, header+"  a:\n    description: A\n    execution: auto\n    x-note: hi\n")
	if r.Valid || r.Diagnostics[0].Code != "UNKNOWN_STEP_KEY" {
		t.Fatalf("x- key on a step accepted: %s", r.Text())
	}
}

func TestLoadCarriesExtensionKeysAndRefusesReservedOnes(t *testing.T) {
	t.Parallel()
	d, r := setup(t, "id: w\nname: W\nversion: 1\nx-owner: finance\nsteps:\n  a: { description: A, execution: auto }\n")
	if d == nil {
		t.Fatal(r.Text())
	}
	if got, want := r.Text(), "Valid: w v1 (1 step) — 1 extension key carried, never read by realm: x-owner\n"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	if d.ExtensionKeys["x-owner"] != "finance" {
		t.Fatalf("extension keys %v", d.ExtensionKeys)
	}
	_, r = setup(t, "id: w\nname: W\nversion: 1\nx-realm-id: 1\nsteps: {}\n")
	if r.Valid || len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "'x-realm-id' is reserved") {
		t.Fatalf("x-realm- key: %s", r.Text())
	}
}

func TestLoadReportsSeveralErrorsAtOnceWithLines(t *testing.T) {
	t.Parallel()
	src := header +
		"  a:\n" + //   5
		"    description: A\n" + //   6
		"    execution: agent\n" + //   7
		"    timeout_seconds: 10\n" + //   8
		"  b:\n" + //   9
		"    execution: auto\n" + //  10
		"    depends_on: [a, ghost]\n" + // 11
		"  c:\n" + //  12
		"    description: C\n" + //  13
		"    execution: auto\n" + //  14
		"    trigger_rule: sometimes\n" // 15
	_, r := setup(t, src)
	want := []string{
		"Step 'a': " + timeoutOnAgent + " (line 8)",
		"Step 'b': missing required field 'description' (step at line 9)",
		"Step 'c': invalid trigger_rule value 'sometimes'; must be 'all_success', 'all_failed', 'all_done', 'one_failed', 'one_success', or 'none_failed' (line 15)",
		"Step 'b': depends_on references unknown step 'ghost' (line 11)",
	}
	if !slices.Equal(r.Errors, want) {
		t.Fatalf("errors:\n  %s\nwant:\n  %s", strings.Join(r.Errors, "\n  "), strings.Join(want, "\n  "))
	}
	text := r.Text()
	if !strings.HasPrefix(text, "Invalid workflow — 4 errors:\n  Step 'a': ") {
		t.Fatalf("text:\n%s", text)
	}
}

func TestLoadNamesDependencyCycleWithoutLine(t *testing.T) {
	t.Parallel()
	src := header +
		"  a: { description: A, execution: auto, depends_on: [c] }\n" +
		"  b: { description: B, execution: auto, depends_on: [a] }\n" +
		"  c: { description: C, execution: auto, depends_on: [b] }\n" +
		"  d: { description: D, execution: auto }\n"
	_, r := setup(t, src)
	if !slices.Equal(r.Errors, []string{"dependency cycle: a -> c -> b -> a"}) {
		t.Fatalf("errors %q", r.Errors)
	}
	if got, want := r.Text(), "Invalid workflow: dependency cycle: a -> c -> b -> a\n"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
}

func TestTopoOrdersDependenciesFirst(t *testing.T) {
	t.Parallel()
	d, r := setup(t, header+
		"  late: { description: L, execution: auto, depends_on: [mid] }\n"+
		"  mid: { description: M, execution: auto, depends_on: [first] }\n"+
		"  first: { description: F, execution: auto }\n")
	if d == nil {
		t.Fatal(r.Text())
	}
	order, err := Topo(d)
	if err != nil || !slices.Equal(order, []string{"first", "mid", "late"}) {
		t.Fatalf("Topo = %v, %v", order, err)
	}
}

func TestLoadExpandsTemplates(t *testing.T) {
	t.Parallel()
	src := `id: w
name: W
version: 1
templates:
  double_check:
    params:
      subject: { required: true }
      strictness: { default: normal }
      note: {}
    steps:
      inspect:
        description: 'Inspect the invoice for {{ subject }} ({{ strictness }} strictness).{{ note }}'
        execution: agent
        prompt: 'Look at {{ context.resources.fetch.text }} for {{subject}}.'
      confirm:
        description: 'Confirm the {{ subject }} findings.'
        execution: agent
        depends_on: ['{{ prefix }}_inspect']
steps:
  vat:
    use_template: double_check
    prefix: vat
    params: { subject: VAT errors, unknown_blank: ignored }
  vat_confirm:
    description: Hand-written confirm wins.
    execution: agent
`
	d, r := setup(t, src)
	if d == nil {
		t.Fatal(r.Text())
	}
	if !slices.Equal(d.StepOrder, []string{"vat_inspect", "vat_confirm"}) {
		t.Fatalf("step order %v", d.StepOrder)
	}
	in := d.Steps["vat_inspect"]
	if in.Description != "Inspect the invoice for VAT errors (normal strictness)." {
		t.Fatalf("description %q", in.Description)
	}
	if in.Prompt != "Look at {{ context.resources.fetch.text }} for VAT errors." {
		t.Fatalf("run-time expression not left intact: %q", in.Prompt)
	}
	if got := d.Steps["vat_confirm"].Description; got != "Hand-written confirm wins." {
		t.Fatalf("generated step beat the hand-written one: %q", got)
	}
	if _, ok := d.Steps["vat"]; ok {
		t.Fatal("the using entry's own key became a step")
	}
}

func TestLoadWiresTemplateDependenciesThroughPrefix(t *testing.T) {
	t.Parallel()
	src := "id: w\nname: W\nversion: 1\ntemplates:\n  t:\n    steps:\n      one: { description: '1', execution: auto }\n      two: { description: '2', execution: auto, depends_on: ['{{ prefix }}_one'] }\nsteps:\n  x: { use_template: t, prefix: p }\n  y: { use_template: t, prefix: q }\n"
	d, r := setup(t, src)
	if d == nil {
		t.Fatal(r.Text())
	}
	if !slices.Equal(d.StepOrder, []string{"p_one", "p_two", "q_one", "q_two"}) || !slices.Equal(d.Steps["q_two"].DependsOn, []string{"q_one"}) {
		t.Fatalf("order %v deps %v", d.StepOrder, d.Steps["q_two"].DependsOn)
	}
}

func TestLoadRendersYAMLParseError(t *testing.T) {
	t.Parallel()
	d, r := setup(t, "id: w\nname: [unclosed\nversion: 1\n")
	if d != nil || r.ParseError == nil {
		t.Fatalf("parse error not reported: %s", r.Text())
	}
	if !strings.HasPrefix(r.Text(), "Invalid: YAML parse error: ") || !strings.Contains(r.Text(), " (") {
		t.Fatalf("text %q", r.Text())
	}
	_, r = setup(t, "id: w\nname: W\nid: v\n")
	if got, want := r.Text(), "Invalid: YAML parse error: Map keys must be unique; 'id' is repeated (3:1)\n"; got != want {
		t.Fatalf("duplicate key: %q, want %q", got, want)
	}
}

func TestReportTextForms(t *testing.T) {
	t.Parallel()
	_, r := setup(t, "id: w\nname: W\nversion: 1.5\ndescription: |\n  Two\n  lines\nsteps:\n  a: { description: A, execution: auto }\n  b: { description: B, execution: auto }\n")
	if got, want := r.Text(), "Valid: w v1.5 (2 steps)\n  Two\n  lines\n"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	_, r = setup(t, "id: w\nname: W\nversion: 1\nsteps: {}\n")
	if got, want := r.Text(), "Valid: w v1 (0 steps)\n"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	_, r = setup(t, "id: w\nname: W\nversion: 1\nsteps:\n  a:\n    description: A\n")
	if got, want := r.Text(), "Invalid workflow: Step 'a': missing required field 'execution' (step at line 5)\n"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
}

func TestLoadStrictFailsOnWarnings(t *testing.T) {
	t.Parallel()
	src := header + "  a:\n    description: A\n    execution: agent\n    input_schema: { type: object }\n    output_schema: { type: object }\n"
	d, r := setup(t, src, LoadOptions{Strict: true})
	if d != nil || r.Valid || !r.StrictFailed {
		t.Fatalf("strict with a warning accepted: %s", r.Text())
	}
	if !strings.HasSuffix(r.Text(), "Valid: w v1 (1 step) — 1 warning; failing due to --strict\n") {
		t.Fatalf("text %q", r.Text())
	}
	js := r.JSON()
	if js["valid"] != false || js["strict"].(map[string]any)["failed"] != true || js["warning_count"] != 1 {
		t.Fatalf("json %v", js)
	}
	d, _ = setup(t, header+"  a: { description: A, execution: auto }\n", LoadOptions{Strict: true})
	if d == nil {
		t.Fatal("strict refused a clean file")
	}
}

func TestReportJSONShape(t *testing.T) {
	t.Parallel()
	_, r := setup(t, header+"  parse:\n    description: P\n    execution: auto\n    timeout: 5\n", LoadOptions{Path: "./billing/"})
	js := r.JSON()
	if js["valid"] != false || js["mode"] != "file" || js["path"] != "./billing/" || js["workflow_id"] != "w" ||
		js["loader_version"] != LoaderVersion || js["schema_version"] != nil || js["error_count"] != 1 || js["warning_count"] != 1 {
		t.Fatalf("json %v", js)
	}
	errs := js["errors"].([]any)
	if len(errs) != 1 || errs[0] != "Invalid: 1 warning, 1 escalated to an error by policy: UNKNOWN_STEP_KEY 'timeout'" {
		t.Fatalf("errors %v", errs)
	}
	dg := js["diagnostics"].([]any)[0].(map[string]any)
	if dg["message"] != "step 'parse': unknown key 'timeout' (line 8) — ignored (did you mean 'timeout_seconds'?)" ||
		dg["line"] != 8 || dg["column"] != 5 || dg["endColumn"] != 12 || dg["did_you_mean"] != "timeout_seconds" {
		t.Fatalf("diagnostic %v", dg)
	}
	_, r = setup(t, "name: W\nversion: 1\nsteps: {}\n")
	if r.JSON()["workflow_id"] != nil {
		t.Fatal("workflow_id not null without an id")
	}
}

func TestLoadResolvesAgentProfilesFromFiles(t *testing.T) {
	t.Parallel()
	src := "id: w\nname: W\nversion: 1\nprofiles_dir: roles\nsteps:\n  a: { description: A, execution: agent, agent_profile: reviewer }\n"
	d, r := setup(t, src, LoadOptions{Files: map[string][]byte{"roles/reviewer.md": []byte("Be strict.")}})
	if d == nil || d.ResolvedProfiles["reviewer"] != "Be strict." {
		t.Fatalf("profile not resolved: %s %v", r.Text(), d)
	}
	_, r = setup(t, src, LoadOptions{Path: "flows/workflow.yaml", Files: map[string][]byte{}})
	if !slices.Equal(r.Errors, []string{"Step 'a': agent_profile 'reviewer' not found. Searched: flows/roles/reviewer.md"}) {
		t.Fatalf("errors %q", r.Errors)
	}
}

// The registered copy carries each workflow_context text as it was read
// beside the file, or the reader's error; without files (a registered copy
// audited, a plan) nothing is resolved.
func TestLoadKeepsWorkflowContextTextsInTheRegisteredCopy(t *testing.T) {
	t.Parallel()
	src := "id: w\nname: W\nversion: 1\nworkflow_context:\n  policy: { source: { path: ./docs/policy.md } }\n  gone: { source: { path: gone.md } }\n  unsent: { source: { path: unsent.md } }\nsteps: {}\n"
	d, r := setup(t, src, LoadOptions{
		Files:      map[string][]byte{"docs/policy.md": []byte("Be kind."), "schema.json": []byte("{}")},
		FileErrors: map[string]string{"gone.md": "open /w/gone.md: no such file or directory"},
	})
	if d == nil {
		t.Fatal(r.Text())
	}
	want := map[string]ContextText{
		"policy": {SourcePath: "./docs/policy.md", Content: "Be kind."},
		"gone":   {SourcePath: "gone.md", Error: "open /w/gone.md: no such file or directory"},
		"unsent": {SourcePath: "unsent.md", Error: "open unsent.md: the file was not sent with the workflow"},
		"schema": {SourcePath: "schema.json", Content: "{}"},
	}
	if !maps.Equal(d.ResolvedContext, want) {
		t.Errorf("resolved context = %v, want %v", d.ResolvedContext, want)
	}
	if d, _ := setup(t, src); d == nil || d.ResolvedContext != nil {
		t.Errorf("resolved without files: %v", d)
	}
}

func TestLoadChecksToolsAgainstMCPServers(t *testing.T) {
	t.Parallel()
	src := "id: w\nname: W\nversion: 1\nmcp_servers:\n  - { id: fs, transport: stdio, command: fs-server }\nsteps:\n" +
		"  a:\n    description: A\n    execution: agent\n    input_schema: { type: object }\n    tools: ['fs:read', 'web:get']\n"
	_, r := setup(t, src)
	if !slices.Equal(r.Errors, []string{"Step 'a': tool 'web:get' names MCP server 'web', which is not declared in 'mcp_servers' (line 11)"}) {
		t.Fatalf("errors %q", r.Errors)
	}
}

func TestLoadPositionsSchemaProblemsAtTheirKeyword(t *testing.T) {
	t.Parallel()
	src := header + "  a:\n    description: A\n    execution: agent\n    input_schema:\n      type: object\n      properties:\n        summary: { type: string, minlength: 10 }\n"
	_, r := setup(t, src)
	if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], "Step 'a': 'input_schema'") ||
		!strings.Contains(r.Errors[0], "minlength") || !strings.HasSuffix(r.Errors[0], " (line 11)") {
		t.Fatalf("errors %q", r.Errors)
	}
}

func TestLoadValidatesDefaultOutputAgainstOutputSchema(t *testing.T) {
	t.Parallel()
	src := header + "  a:\n    description: A\n    execution: agent\n    output_schema:\n      type: object\n      properties: { label: { type: string } }\n" +
		"    validation_exhaustion: { mode: default, default_output: { label: 3 } }\n"
	_, r := setup(t, src)
	if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], "Step 'a': 'validation_exhaustion.default_output' does not validate against the step's own 'output_schema': ") ||
		!strings.Contains(r.Errors[0], `"message":"must be string"`) || !strings.HasSuffix(r.Errors[0], " (step at line 5)") {
		t.Fatalf("errors %q", r.Errors)
	}
}

func TestLoadRefusesIneligibleStructuredOutput(t *testing.T) {
	t.Parallel()
	src := header + "  a:\n    description: A\n    execution: agent\n    output_schema: { type: object, properties: { x: { type: string } } }\n    structured_output: strict\n"
	_, r := setup(t, src)
	if !slices.Equal(r.Errors, []string{"Step 'a': 'structured_output: strict' is not eligible for this step's schema — add 'additionalProperties: false' at 'the schema root' (step at line 5)"}) {
		t.Fatalf("errors %q", r.Errors)
	}
}

func TestLoadAcceptsTheSpecExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/expense_claim.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, r := setup(t, string(src))
	if d == nil {
		t.Fatal(r.Text())
	}
	if len(r.Diagnostics) != 1 || r.Diagnostics[0].Code != "IDEMPOTENT_INERT_IN_FINALIZER" {
		t.Fatalf("diagnostics %+v", r.Diagnostics)
	}
	if !strings.Contains(r.Text(), "Valid: expense-claim v2 (8 steps) — 1 extension key carried, never read by realm: x-owner\n") {
		t.Fatalf("text:\n%s", r.Text())
	}
	cl := d.Steps["classify"]
	if cl.Threshold() != 3 || cl.ValidationExhaustion.Mode != "default" || cl.StructuredOutput != "strict" {
		t.Fatalf("classify %+v", cl)
	}
	m := d.Steps["manager"]
	if !m.Gated() || m.Gate.DefaultChoice != "decline" || !slices.Equal(m.EffectiveChoices(), []string{"approve", "decline"}) {
		t.Fatalf("manager gate %+v", m.Gate)
	}
	if d.Services["ledger"].RateLimit["requests_per_second"] != float64(2) || !slices.Equal(d.Extensions, []string{"./ext/claims.mjs"}) {
		t.Fatalf("services %+v extensions %v", d.Services["ledger"], d.Extensions)
	}
	if d.WorkflowContext["policy"].Path != "./policy/expenses.md" {
		t.Fatalf("context %+v", d.WorkflowContext)
	}
}

func TestLoadMCPServerTransports(t *testing.T) {
	t.Parallel()
	head := "id: w\nname: W\nversion: 1\nmcp_servers:\n"
	tests := []struct {
		name, servers string
		want          []string
	}{
		{"stdio with command, args and env", "  - { id: fs, transport: stdio, command: fs-server, args: [a], env: { T: '${T}' } }\n", nil},
		{"http with url and headers", "  - { id: web, transport: http, url: 'https://tools.example/mcp', headers: { Authorization: 'Bearer ${TOK}' } }\n", nil},
		{"http without url", "  - { id: web, transport: http }\n", []string{"mcp_servers[0]: missing required field 'url' (line 5)"}},
		{"http with a command", "  - { id: web, transport: http, url: 'http://x/mcp', command: srv }\n",
			[]string{"mcp_servers[0]: 'command' is not valid with transport 'http' (line 5)"}},
		{"stdio with headers", "  - { id: fs, transport: stdio, command: srv, headers: { A: b } }\n",
			[]string{"mcp_servers[0]: 'headers' is not valid with transport 'stdio' (line 5)"}},
		{"url that is not http", "  - { id: web, transport: http, url: 'ftp://x' }\n",
			[]string{"mcp_servers[0]: 'url' must be an http:// or https:// address (found: 'ftp://x') (line 5)"}},
		{"unknown transport", "  - { id: web, transport: sse, url: 'http://x' }\n",
			[]string{"mcp_servers[0]: 'transport' must be 'stdio' or 'http' (found: 'sse') (line 5)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, r := setup(t, head+tt.servers+"steps:\n  a: { description: A, execution: agent }\n")
			if !slices.Equal(r.Errors, tt.want) {
				t.Fatalf("errors %q, want %q", r.Errors, tt.want)
			}
		})
	}
}
