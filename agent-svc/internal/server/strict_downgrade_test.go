package server_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/realm-go/realm/agent-svc/internal/provider"
	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// codeWorkflow has one strict step whose schema is eligible under every
// provider's rules.
const codeWorkflow = `id: strictcode
name: Strict code
version: 1
steps:
  code:
    description: Give the code.
    execution: agent
    prompt: Give code.
    structured_output: strict
    input_schema:
      type: object
      additionalProperties: false
      required: [code]
      properties:
        code: { type: string }
`

// optionalWorkflow has one strict step with an optional property: used
// (with a note) under Anthropic's rules, refused under OpenAI's.
const optionalWorkflow = `id: strictopt
name: Strict optional
version: 1
steps:
  note:
    description: Write a note.
    execution: agent
    prompt: Write note.
    structured_output: strict
    input_schema:
      type: object
      additionalProperties: false
      required: [note]
      properties:
        note: { type: string }
        extra: { type: string }
`

// register registers a workflow's YAML with the engine.
func register(t *testing.T, eng realmv1.EngineServiceClient, yaml string) {
	t.Helper()
	r, err := eng.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(yaml), Path: "w.yaml"}})
	if err != nil || !r.GetRegistered() {
		t.Fatalf("register: %v %s", err, r.GetReport().GetText())
	}
}

// strictSent says a model request carried strict structured output.
func strictSent(kind string, body map[string]any) bool {
	if kind == "anthropic" {
		tools, _ := body["tools"].([]any)
		for _, tl := range tools {
			if m, _ := tl.(map[string]any); m["strict"] == true {
				return true
			}
		}
		return false
	}
	rf, _ := body["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	return rf["type"] == "json_schema" && js["strict"] == true
}

// strictOf is each step's structured_output record in the run's evidence
// (the last attempt's, for a step answered more than once).
func strictOf(t *testing.T, eng realmv1.EngineServiceClient, run string) map[string]any {
	t.Helper()
	exp, err := eng.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	var bundle struct {
		Run struct {
			Evidence []struct {
				StepID      string         `json:"step_id"`
				Diagnostics map[string]any `json:"diagnostics"`
			} `json:"evidence"`
		} `json:"run"`
	}
	if err := json.Unmarshal(exp.GetBundle(), &bundle); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, e := range bundle.Run.Evidence {
		got[e.StepID] = e.Diagnostics["structured_output"]
	}
	return got
}

const (
	anthropicError = `{"type":"error","error":{"type":"%s","message":"%s"}}`
	grammarMessage = "Grammar compilation is temporarily unavailable. Please retry."
)

func anthropicBody(typ, msg string) string {
	return strings.Replace(strings.Replace(anthropicError, "%s", typ, 1), "%s", msg, 1)
}

// A strict request the service refuses is sent once more without strict
// when the provider's ladder says so (Anthropic: 400 and 503; OpenAI:
// 400), and the evidence says why with the service's own words; a status
// off the ladder propagates with every request strict.
func TestALiveStrictFailureDowngradesOnlyOnTheLaddersStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, kind string
		status     int
		body       string
		// want is the evidence record; nil means the drive fails with
		// the status and nothing is downgraded.
		want map[string]any
	}{
		{name: "anthropic 400 is api_rejected_schema", kind: "anthropic", status: 400,
			body: anthropicBody("invalid_request_error", "tools.0.strict: schema is too complex"),
			want: map[string]any{"requested": true, "sent": false, "provider": "anthropic", "downgrade_reason": "api_rejected_schema",
				"api_message": "tools.0.strict: schema is too complex", "submission_channel": "tool"}},
		{name: "anthropic 503 with the grammar label is grammar_unavailable", kind: "anthropic", status: 503,
			body: anthropicBody("overloaded_error", grammarMessage),
			want: map[string]any{"requested": true, "sent": false, "provider": "anthropic", "downgrade_reason": "grammar_unavailable",
				"api_message": grammarMessage, "submission_channel": "tool"}},
		{name: "another anthropic 503 is service_unavailable", kind: "anthropic", status: 503,
			body: anthropicBody("api_error", "Service temporarily unavailable"),
			want: map[string]any{"requested": true, "sent": false, "provider": "anthropic", "downgrade_reason": "service_unavailable",
				"api_message": "Service temporarily unavailable", "submission_channel": "tool"}},
		{name: "anthropic 500 never downgrades", kind: "anthropic", status: 500,
			body: anthropicBody("api_error", "Internal server error")},
		{name: "openai 400 keeps param and code verbatim", kind: "openai", status: 400,
			body: `{"error":{"message":"Invalid schema for response_format 'realm_step_output'.","type":"invalid_request_error","param":"response_format","code":"invalid_json_schema"}}`,
			want: map[string]any{"requested": true, "sent": false, "provider": "openai", "downgrade_reason": "api_rejected_schema",
				"api_message": "Invalid schema for response_format 'realm_step_output'.", "api_param": "response_format", "api_code": "invalid_json_schema"}},
		{name: "openai 400 keeps a null param and code", kind: "openai", status: 400,
			body: `{"error":{"message":"strict is not supported","type":"invalid_request_error","param":null,"code":null}}`,
			want: map[string]any{"requested": true, "sent": false, "provider": "openai", "downgrade_reason": "api_rejected_schema",
				"api_message": "strict is not supported", "api_param": nil, "api_code": nil}},
		{name: "openai 503 never downgrades", kind: "openai", status: 503,
			body: `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eng := startEngine(t)
			register(t, eng, codeWorkflow)
			st := newStub(t, tc.kind, func(_ int, r wireRequest) answer {
				if strictSent(tc.kind, r.Body) {
					// retry-after-ms keeps the SDK's own retries quick.
					return answer{status: tc.status, body: tc.body, headers: map[string]string{"retry-after-ms": "1"}}
				}
				return answer{output: map[string]any{"code": "ABC"}}
			})
			services := openaiAt(st.URL())
			if tc.kind == "anthropic" {
				services = anthropicAt(st.URL())
			}
			agent := startAgent(t, server.Config{Engine: eng, Services: services})
			evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strictcode", Options: opts(tc.kind, "model-test")}, nil)
			end := last(evs)
			reqs := st.seen()
			if tc.want == nil {
				blocked := ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED)
				if end.GetOutcome() == realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || len(blocked) != 1 ||
					blocked[0].GetFailure().GetLastObservedStatus() != int32(tc.status) {
					t.Fatalf("end = %v, blocked = %v; want the drive stopped by the %d\n%s", end, blocked, tc.status, texts(evs))
				}
				for i, r := range reqs {
					if !strictSent(tc.kind, r.Body) {
						t.Errorf("request %d went out without strict after a %d", i+1, tc.status)
					}
				}
				return
			}
			if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
				t.Fatalf("end = %v\n%s", end, texts(evs))
			}
			if n := len(reqs); n < 2 || !strictSent(tc.kind, reqs[0].Body) || strictSent(tc.kind, reqs[n-1].Body) {
				t.Fatalf("%d requests; want strict ones refused, then one without strict", n)
			}
			if tc.kind == "openai" {
				if rf, _ := reqs[len(reqs)-1].Body["response_format"].(map[string]any); rf["type"] != "json_object" {
					t.Errorf("the resend's response_format = %v, want json_object", rf)
				}
			}
			if got := strictOf(t, eng, end.GetRunId())["code"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("structured_output = %v\nwant %v", got, tc.want)
			}
		})
	}
}

// Once a step's strict request was downgraded live, its later attempts in
// the same drive (here a schema repair) go out without strict and report
// the original reason and message.
func TestALiveDowngradeSticksToTheStepAcrossARepair(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	register(t, eng, codeWorkflow)
	answers := 0
	st := newStub(t, "anthropic", func(_ int, r wireRequest) answer {
		if strictSent("anthropic", r.Body) {
			return answer{status: 400, body: anthropicBody("invalid_request_error", "schema refused")}
		}
		answers++
		if answers == 1 {
			return answer{output: map[string]any{"code": 7}} // refused by the schema: repaired
		}
		return answer{output: map[string]any{"code": "ABC"}}
	})
	agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strictcode", Options: opts("anthropic", "claude-test")}, nil)
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED || len(ofKind(evs, realmv1.DriveEventKind_DRIVE_EVENT_KIND_REPAIR)) != 1 {
		t.Fatalf("end = %v, want completed after one repair\n%s", end, texts(evs))
	}
	var sent []bool
	for _, r := range st.seen() {
		sent = append(sent, strictSent("anthropic", r.Body))
	}
	if want := []bool{true, false, false}; !reflect.DeepEqual(sent, want) {
		t.Errorf("strict per request = %v, want %v (the repair goes without strict)", sent, want)
	}
	want := map[string]any{"requested": true, "sent": false, "provider": "anthropic", "downgrade_reason": "api_rejected_schema",
		"api_message": "schema refused", "submission_channel": "tool"}
	if got := strictOf(t, eng, end.GetRunId())["code"]; !reflect.DeepEqual(got, want) {
		t.Errorf("structured_output = %v\nwant %v", got, want)
	}
}

// A registered workflow is judged again at drive time with the active
// provider's rules: an optional property is used (with a note) by
// Anthropic and refused by OpenAI, which then gets no strict and a ⚠ line
// once, however many attempts the step takes.
func TestTheDriveRechecksEligibilityWithTheActiveProvidersRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind string
		sent bool
		line string
		want map[string]any
	}{
		{kind: "anthropic", sent: true,
			line: "  ⚠ Step 'note': structured_output: strict — sent, with caveats: optional_emission at properties/extra.",
			want: map[string]any{"requested": true, "sent": true, "provider": "anthropic"}},
		{kind: "openai", sent: false,
			line: "  ⚠ Step 'note': structured_output: strict — not sent (gate_ineligible): not_all_required at properties/extra; the answer is validated after it arrives.",
			want: map[string]any{"requested": true, "sent": false, "provider": "openai", "downgrade_reason": "gate_ineligible"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			eng := startEngine(t)
			register(t, eng, optionalWorkflow)
			n := 0
			st := newStub(t, tc.kind, func(int, wireRequest) answer {
				if n++; n == 1 {
					return answer{output: map[string]any{"note": 1}} // repaired
				}
				return answer{output: map[string]any{"note": "done"}}
			})
			services := openaiAt(st.URL())
			if tc.kind == "anthropic" {
				services = anthropicAt(st.URL())
			}
			agent := startAgent(t, server.Config{Engine: eng, Services: services})
			evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strictopt", Options: opts(tc.kind, "model-test")}, nil)
			end := last(evs)
			if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
				t.Fatalf("end = %v\n%s", end, texts(evs))
			}
			reqs := st.seen()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2 (an answer and its repair)", len(reqs))
			}
			for i, r := range reqs {
				if strictSent(tc.kind, r.Body) != tc.sent {
					t.Errorf("request %d: strict sent = %v, want %v", i+1, !tc.sent, tc.sent)
				}
			}
			var stderrLines []string
			for _, ev := range evs {
				for _, l := range ev.GetLines() {
					if l.GetStream() == realmv1.DriveStream_DRIVE_STREAM_STDERR && strings.Contains(l.GetText(), "structured_output") {
						stderrLines = append(stderrLines, l.GetText())
					}
				}
			}
			if !reflect.DeepEqual(stderrLines, []string{tc.line}) {
				t.Errorf("structured_output lines on stderr = %q, want %q once", stderrLines, tc.line)
			}
			if got := strictOf(t, eng, end.GetRunId())["note"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("structured_output = %v\nwant %v", got, tc.want)
			}
		})
	}
}

// An OpenAI-compatible endpoint gets strict only when --strict-base-url
// attests it enforces it; without it strict is never sent and the schema
// is not even assessed (no ⚠ line, compat_endpoint for every step).
func TestACompatEndpointGetsStrictOnlyWhenAttested(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		attest bool
		sent   bool
		want   map[string]any
	}{
		{name: "without --strict-base-url", attest: false, sent: false,
			want: map[string]any{"requested": true, "sent": false, "provider": "openai", "downgrade_reason": "compat_endpoint"}},
		{name: "with --strict-base-url", attest: true, sent: true,
			want: map[string]any{"requested": true, "sent": true, "provider": "openai"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eng := startEngine(t)
			register(t, eng, codeWorkflow)
			register(t, eng, optionalWorkflow)
			st := newStub(t, "openai", func(_ int, r wireRequest) answer {
				if strings.Contains(r.User, "Give code") {
					return answer{output: map[string]any{"code": "ABC"}}
				}
				return answer{output: map[string]any{"note": "done"}}
			})
			allow, err := provider.NewAllowlist(st.URL())
			if err != nil {
				t.Fatal(err)
			}
			agent := startAgent(t, server.Config{Engine: eng, Services: provider.Services{OpenAI: provider.Config{APIKey: "test-key"}}, AllowBaseURLs: allow})
			o := &realmv1.DriveOptions{Provider: "openai", Model: "compat-model", BaseUrl: st.URL(), StrictBaseUrl: tc.attest}
			evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strictcode", Options: o}, nil)
			end := last(evs)
			if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
				t.Fatalf("end = %v\n%s", end, texts(evs))
			}
			reqs := st.seen()
			if len(reqs) != 1 || strictSent("openai", reqs[0].Body) != tc.sent {
				t.Fatalf("requests = %v, want one with strict sent = %v", reqs, tc.sent)
			}
			if !tc.sent && reqs[0].Body["response_format"] != nil {
				t.Errorf("response_format = %v, want none on a compat endpoint", reqs[0].Body["response_format"])
			}
			if got := strictOf(t, eng, end.GetRunId())["code"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("structured_output = %v\nwant %v", got, tc.want)
			}
			// The optional-property step: judged (and refused) only when
			// strict could be sent.
			evs = drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strictopt", Options: o}, nil)
			end = last(evs)
			if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
				t.Fatalf("end = %v\n%s", end, texts(evs))
			}
			wantReason := "compat_endpoint"
			if tc.attest {
				wantReason = "gate_ineligible"
			}
			got, _ := strictOf(t, eng, end.GetRunId())["note"].(map[string]any)
			warned := strings.Contains(texts(evs), "structured_output: strict")
			if got["downgrade_reason"] != wantReason || warned != tc.attest {
				t.Errorf("optional step: structured_output = %v, ⚠ line shown = %v; want %s, shown = %v\n%s", got, warned, wantReason, tc.attest, texts(evs))
			}
		})
	}
}

// When the resend after a downgrade fails too, the failure carries the
// downgrade: the drive failure on the run discloses it as the evidence
// would have.
func TestAFailedResendStillDisclosesTheDowngrade(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	register(t, eng, codeWorkflow)
	st := newStub(t, "anthropic", func(_ int, r wireRequest) answer {
		if strictSent("anthropic", r.Body) {
			return answer{status: 400, body: anthropicBody("invalid_request_error", "schema refused")}
		}
		return answer{status: 500, body: anthropicBody("api_error", "boom"), headers: map[string]string{"retry-after-ms": "1"}}
	})
	agent := startAgent(t, server.Config{Engine: eng, Services: anthropicAt(st.URL())})
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strictcode", Options: opts("anthropic", "claude-test")}, nil)
	end := last(evs)
	if end.GetOutcome() == realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("end = %v, want the drive stopped by the resend's 500", end)
	}
	want := map[string]any{"requested": true, "sent": false, "provider": "anthropic", "downgrade_reason": "api_rejected_schema", "api_message": "schema refused"}
	exp, err := eng.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: end.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	var bundle struct {
		Run struct {
			DriveFailures struct {
				Entries []struct {
					LastObservedStatus int            `json:"last_observed_status"`
					StructuredOutput   map[string]any `json:"structured_output"`
				} `json:"entries"`
			} `json:"drive_failures"`
		} `json:"run"`
	}
	if err := json.Unmarshal(exp.GetBundle(), &bundle); err != nil {
		t.Fatal(err)
	}
	entries := bundle.Run.DriveFailures.Entries
	if len(entries) != 1 || entries[0].LastObservedStatus != 500 || !reflect.DeepEqual(entries[0].StructuredOutput, want) {
		t.Errorf("drive failures = %+v\nwant one 500 with structured_output %v", entries, want)
	}
}

// The o1 family has no strict mode: the schema is not judged (no ⚠ line)
// and the evidence says provider_unsupported.
func TestTheO1FamilyDisclosesStrictAsUnsupported(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	register(t, eng, optionalWorkflow)
	st := newStub(t, "openai", func(int, wireRequest) answer { return answer{output: map[string]any{"note": "done"}} })
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL())})
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "strictopt", Options: opts("openai", "o1-mini")}, nil)
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("end = %v\n%s", end, texts(evs))
	}
	if reqs := st.seen(); len(reqs) != 1 || reqs[0].Body["response_format"] != nil {
		t.Errorf("requests = %v, want one without response_format", reqs)
	}
	if strings.Contains(texts(evs), "structured_output: strict") {
		t.Errorf("output:\n%s\nwant no structured_output line", texts(evs))
	}
	want := map[string]any{"requested": true, "sent": false, "provider": "openai-reasoning", "downgrade_reason": "provider_unsupported"}
	if got := strictOf(t, eng, end.GetRunId())["note"]; !reflect.DeepEqual(got, want) {
		t.Errorf("structured_output = %v\nwant %v", got, want)
	}
}
