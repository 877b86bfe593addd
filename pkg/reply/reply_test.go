package reply

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The want JSON of each case is copied from seed "MCP tools". The seed's
// examples leave out fields that are empty; replyDefaults puts back the
// always-present ones with their empty values before comparing.
var replyDefaults = map[string]any{
	"command":      "",
	"run_id":       "",
	"context_hint": "",
	"next_actions": []any{},
	"warnings":     []any{},
	"errors":       []any{},
	"data":         map[string]any{},
	"evidence":     []any{},
}

const runA = "7da561ee-5987-497d-83a5-1eded6dc9b63"

// classifyAction is the seed's "An entry of next_actions" as protobuf.
func classifyAction(t *testing.T) *realmv1.NextAction {
	t.Helper()
	return &realmv1.NextAction{
		Instruction: &realmv1.Instruction{
			Tool:       "execute_step",
			ParamsJson: mustJSON(t, map[string]any{"run_id": runA, "command": "classify"}),
			CallWithJson: mustJSON(t, map[string]any{
				"run_id": runA, "command": "classify",
				"params": map[string]any{"category": "<billing|bug|other>", "confidence": 0},
			}),
		},
		InputSchemaJson: mustJSON(t, map[string]any{"type": "object", "required": []any{"category", "confidence"}, "…": "…"}),
		HumanReadable:   "Execute step 'classify': Classify the ticket.",
		Orientation:     "Run is active. Next step ready: 'classify'.",
	}
}

const classifyActionJSON = `{
    "instruction": {
      "tool": "execute_step",
      "params": { "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63", "command": "classify" },
      "call_with": {
        "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63",
        "command": "classify",
        "params": { "category": "<billing|bug|other>", "confidence": 0 }
      }
    },
    "input_schema": { "type": "object", "required": ["category", "confidence"], "…": "…" },
    "human_readable": "Execute step 'classify': Classify the ticket.",
    "orientation": "Run is active. Next step ready: 'classify'."
  }`

func TestReplyJSONMatchesSeedExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		build func(t *testing.T) *realmv1.Reply
		want  string
	}{
		{
			name: "execute_step whose answer made a guard abort the run",
			build: func(t *testing.T) *realmv1.Reply {
				return &realmv1.Reply{
					Command:             "assess",
					RunId:               "df89a4e4-7a4b-4ff9-aaf0-657f70ae1723",
					RunVersion:          proto.Int64(2),
					Status:              realmv1.ReplyStatus_REPLY_STATUS_OK,
					ContextHint:         "Guard step 'only_low_risk' aborted the run.",
					RunPhase:            realmv1.RunPhase_RUN_PHASE_ABORTED,
					Guards:              []*realmv1.GuardOutcome{{Step: "only_low_risk", Outcome: "abort"}},
					EndedBy:             &realmv1.EndedBy{Arm: "guard_abort", Step: "only_low_risk", Reason: proto.String("High-risk refunds are not paid automatically.")},
					HasChainedAutoSteps: true,
					ChainedAutoSteps:    []*realmv1.ChainedStep{{Step: "only_low_risk", RunPhase: realmv1.RunPhase_RUN_PHASE_ABORTED}},
				}
			},
			want: `{
  "command": "assess",
  "run_id": "df89a4e4-7a4b-4ff9-aaf0-657f70ae1723",
  "run_version": 2,
  "status": "ok",
  "context_hint": "Guard step 'only_low_risk' aborted the run.",
  "run_phase": "aborted",
  "guards": [{ "step": "only_low_risk", "outcome": "abort" }],
  "ended_by": {
    "arm": "guard_abort",
    "step": "only_low_risk",
    "reason": "High-risk refunds are not paid automatically."
  },
  "chained_auto_steps": [{ "step": "only_low_risk", "run_phase": "aborted" }]
}`,
		},
		{
			name: "start_run that created a run",
			build: func(t *testing.T) *realmv1.Reply {
				return &realmv1.Reply{
					Command:     "start_run",
					RunId:       runA,
					RunVersion:  proto.Int64(0),
					Status:      realmv1.ReplyStatus_REPLY_STATUS_OK,
					ContextHint: "Run '" + runA + "' created for workflow 'triage'. Ready for the agent: 'classify'.",
					RunPhase:    realmv1.RunPhase_RUN_PHASE_RUNNING,
					Deduped:     proto.Bool(false),
					NextActions: []*realmv1.NextAction{classifyAction(t)},
				}
			},
			want: `{
  "command": "start_run",
  "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63",
  "run_version": 0,
  "status": "ok",
  "data": {},
  "evidence": [],
  "warnings": [],
  "errors": [],
  "context_hint": "Run '7da561ee-5987-497d-83a5-1eded6dc9b63' created for workflow 'triage'. Ready for the agent: 'classify'.",
  "run_phase": "running",
  "deduped": false,
  "next_actions": [` + classifyActionJSON + `]
}`,
		},
		{
			name: "refused answer for the step's input schema",
			build: func(t *testing.T) *realmv1.Reply {
				return &realmv1.Reply{
					Command:    "classify",
					RunId:      runA,
					RunVersion: proto.Int64(0),
					Status:     realmv1.ReplyStatus_REPLY_STATUS_ERROR,
					Errors:     []string{"Invalid input for step 'classify'"},
					ErrorCode:  "VALIDATION_INPUT_SCHEMA",
					ErrorDetails: mustStruct(t, map[string]any{
						"errors": []any{map[string]any{
							"instancePath": "/category",
							"schemaPath":   "#/properties/category/enum",
							"keyword":      "enum",
							"params":       map[string]any{"allowedValues": []any{"billing", "bug", "other"}},
							"message":      "must be equal to one of the allowed values",
						}},
						"rejections": 1,
						"threshold":  6,
					}),
					AgentAction: realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT,
					ContextHint: "Error during 'classify'. Run phase: 'running'.",
					RunPhase:    realmv1.RunPhase_RUN_PHASE_RUNNING,
					NextActions: []*realmv1.NextAction{classifyAction(t)},
				}
			},
			want: `{
  "command": "classify",
  "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63",
  "run_version": 0,
  "status": "error",
  "errors": ["Invalid input for step 'classify'"],
  "error_code": "VALIDATION_INPUT_SCHEMA",
  "error_details": {
    "errors": [
      {
        "instancePath": "/category",
        "schemaPath": "#/properties/category/enum",
        "keyword": "enum",
        "params": { "allowedValues": ["billing", "bug", "other"] },
        "message": "must be equal to one of the allowed values"
      }
    ],
    "rejections": 1,
    "threshold": 6
  },
  "agent_action": "provide_input",
  "context_hint": "Error during 'classify'. Run phase: 'running'.",
  "run_phase": "running",
  "next_actions": [` + classifyActionJSON + `]
}`,
		},
		{
			name: "step with a gate",
			build: func(t *testing.T) *realmv1.Reply {
				return &realmv1.Reply{
					Command:     "draft",
					Status:      realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED,
					ContextHint: "Run is paused at gate '00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e'. Available choices: send, discard.",
					RunPhase:    realmv1.RunPhase_RUN_PHASE_GATE_WAITING,
					Gate: &realmv1.Gate{
						GateId:       "00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e",
						StepName:     "draft",
						Preview:      mustValue(t, map[string]any{"reply": "We have refunded the charge."}),
						Choices:      []string{"send", "discard"},
						ResponseSpec: mustStruct(t, map[string]any{"choices": []any{"send", "discard"}}),
					},
				}
			},
			want: `{
  "command": "draft",
  "status": "confirm_required",
  "context_hint": "Run is paused at gate '00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e'. Available choices: send, discard.",
  "run_phase": "gate_waiting",
  "gate": {
    "gate_id": "00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e",
    "step_name": "draft",
    "preview": { "reply": "We have refunded the charge." },
    "choices": ["send", "discard"],
    "response_spec": { "choices": ["send", "discard"] }
  }
}`,
		},
		{
			name: "answer after the gate's time was up that names the settled choice",
			build: func(t *testing.T) *realmv1.Reply {
				return &realmv1.Reply{
					Command:    "approve",
					RunId:      "05a14e39-f39f-45be-856b-4795dc0fddeb",
					RunVersion: proto.Int64(3),
					Status:     realmv1.ReplyStatus_REPLY_STATUS_OK,
					Warnings: []string{
						"gate '1a42b4b0-1fa1-42c9-b9ca-099c040b43f2' on 'approve' had expired 3m before this call — this submit_human_response call first carried out its declared settle_default: the default choice 'hold' was recorded (enacted_via: submit_human_response).",
					},
					ErrorDetails: mustStruct(t, map[string]any{
						"runId":          "05a14e39-f39f-45be-856b-4795dc0fddeb",
						"gateId":         "1a42b4b0-1fa1-42c9-b9ca-099c040b43f2",
						"winning_choice": "hold",
						"resolved_by":    "timeout",
						"expired_at":     "2026-10-09T09:14:02.511Z",
						"overdue_ms":     184311,
					}),
					ContextHint:    "the outcome matches your choice, but it was settled by timeout; your response was not recorded. Guard step 'only_if_shipping' aborted the run.",
					RunPhase:       realmv1.RunPhase_RUN_PHASE_ABORTED,
					Guards:         []*realmv1.GuardOutcome{{Step: "only_if_shipping", Outcome: "abort"}},
					EndedBy:        &realmv1.EndedBy{Arm: "guard_abort", Step: "only_if_shipping", Reason: proto.String("The order was held.")},
					AnswerRecorded: proto.Bool(false),
				}
			},
			want: `{
  "command": "approve",
  "run_id": "05a14e39-f39f-45be-856b-4795dc0fddeb",
  "run_version": 3,
  "status": "ok",
  "warnings": [
    "gate '1a42b4b0-1fa1-42c9-b9ca-099c040b43f2' on 'approve' had expired 3m before this call — this submit_human_response call first carried out its declared settle_default: the default choice 'hold' was recorded (enacted_via: submit_human_response)."
  ],
  "error_details": {
    "runId": "05a14e39-f39f-45be-856b-4795dc0fddeb",
    "gateId": "1a42b4b0-1fa1-42c9-b9ca-099c040b43f2",
    "winning_choice": "hold",
    "resolved_by": "timeout",
    "expired_at": "2026-10-09T09:14:02.511Z",
    "overdue_ms": 184311
  },
  "context_hint": "the outcome matches your choice, but it was settled by timeout; your response was not recorded. Guard step 'only_if_shipping' aborted the run.",
  "run_phase": "aborted",
  "guards": [{ "step": "only_if_shipping", "outcome": "abort" }],
  "ended_by": { "arm": "guard_abort", "step": "only_if_shipping", "reason": "The order was held." },
  "answer_recorded": false
}`,
		},
		{
			name: "answer with a claim token from the conversation that opened the question",
			build: func(t *testing.T) *realmv1.Reply {
				return &realmv1.Reply{
					Command:     "draft",
					RunId:       runA,
					RunVersion:  proto.Int64(6),
					Status:      realmv1.ReplyStatus_REPLY_STATUS_OK,
					ContextHint: "Gate 'draft' resolved with choice 'send'. Owed to the engine: 'send' — call advance_run.",
					RunPhase:    realmv1.RunPhase_RUN_PHASE_RUNNING,
					GateClaim: &realmv1.GateClaim{
						Proof:    "matched",
						OpenedBy: &realmv1.Holder{By: proto.String("ops@server-1"), BySource: "derived", Channel: "mcp-stdio"},
					},
				}
			},
			want: `{
  "command": "draft",
  "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63",
  "run_version": 6,
  "status": "ok",
  "context_hint": "Gate 'draft' resolved with choice 'send'. Owed to the engine: 'send' — call advance_run.",
  "run_phase": "running",
  "gate_claim": {
    "proof": "matched",
    "opened_by": { "by": "ops@server-1", "by_source": "derived", "channel": "mcp-stdio" }
  }
}`,
		},
		{
			name: "create_workflow with the new id in data and empty diagnostics",
			build: func(t *testing.T) *realmv1.Reply {
				return &realmv1.Reply{
					Command:        "create_workflow",
					RunId:          "05ae1756-2fe6-4152-91d1-e1ce1c381083",
					Status:         realmv1.ReplyStatus_REPLY_STATUS_OK,
					Data:           mustStruct(t, map[string]any{"workflow_id": "release-notes-88c897726fbda006"}),
					ContextHint:    "Run '05ae1756-2fe6-4152-91d1-e1ce1c381083' created for workflow 'release-notes-88c897726fbda006'. Ready for the agent: 'collect'.",
					RunPhase:       realmv1.RunPhase_RUN_PHASE_RUNNING,
					Deduped:        proto.Bool(false),
					HasDiagnostics: true,
				}
			},
			want: `{
  "command": "create_workflow",
  "run_id": "05ae1756-2fe6-4152-91d1-e1ce1c381083",
  "status": "ok",
  "data": { "workflow_id": "release-notes-88c897726fbda006" },
  "context_hint": "Run '05ae1756-2fe6-4152-91d1-e1ce1c381083' created for workflow 'release-notes-88c897726fbda006'. Ready for the agent: 'collect'.",
  "run_phase": "running",
  "deduped": false,
  "diagnostics": []
}`,
		},
		{
			name: "advance_run act and a driver with no recorded name",
			build: func(t *testing.T) *realmv1.Reply {
				run := "c35030b6-0e8c-44c6-98a8-c0b5093b8c5b"
				return &realmv1.Reply{
					Command:    "advance_run",
					RunId:      run,
					RunVersion: proto.Int64(4),
					Status:     realmv1.ReplyStatus_REPLY_STATUS_BLOCKED,
					RunPhase:   realmv1.RunPhase_RUN_PHASE_RUNNING,
					NextActions: []*realmv1.NextAction{{
						Instruction: &realmv1.Instruction{
							Tool:         "advance_run",
							ParamsJson:   mustJSON(t, map[string]any{"run_id": "<run>"}),
							CallWithJson: mustJSON(t, map[string]any{"run_id": "<run>"}),
						},
						HumanReadable: "Call advance_run to run the step the engine owes: 'post_approval'. It runs it with this server's extensions and environment.",
						Orientation:   "Run is active. Engine work is owed: 'post_approval'.",
					}},
					AgentAction:   realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION,
					BlockedReason: &realmv1.BlockedReason{EligibleSteps: []string{"post_approval"}, Suggestion: "Call advance_run, as next_actions says."},
					ContinuedBy:   &realmv1.Holder{AbsentCause: "driver_not_recorded"},
					StoppedStep:   "post_approval",
					RetryAfter:    proto.Int32(5),
				}
			},
			want: `{
  "command": "advance_run",
  "run_id": "c35030b6-0e8c-44c6-98a8-c0b5093b8c5b",
  "run_version": 4,
  "status": "blocked",
  "run_phase": "running",
  "agent_action": "resolve_precondition",
  "retry_after": 5,
  "stopped_step": "post_approval",
  "blocked_reason": { "eligible_steps": ["post_approval"], "suggestion": "Call advance_run, as next_actions says." },
  "continued_by": { "by": null, "absent_cause": "driver_not_recorded" },
  "next_actions": [{
    "instruction": {
      "tool": "advance_run",
      "params": { "run_id": "<run>" },
      "call_with": { "run_id": "<run>" }
    },
    "human_readable": "Call advance_run to run the step the engine owes: 'post_approval'. It runs it with this server's extensions and environment.",
    "orientation": "Run is active. Engine work is owed: 'post_approval'."
  }]
}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := decode(t, tt.want)
			for k, v := range replyDefaults {
				if _, ok := want[k]; !ok {
					want[k] = v
				}
			}
			assertSameJSON(t, ReplyJSON(tt.build(t)), want)
		})
	}
}

func TestReplyJSONLeavesOutUnsetPresentWhenFields(t *testing.T) {
	t.Parallel()
	got := ReplyJSON(&realmv1.Reply{Command: "start_run", Status: realmv1.ReplyStatus_REPLY_STATUS_ERROR})
	for _, k := range []string{
		"run_version", "run_phase", "error_code", "error_details", "agent_action", "retry_after",
		"blocked_reason", "gate", "deduped", "chained_auto_steps", "stopped_step", "guards",
		"ended_by", "answer_recorded", "gate_claim", "adopted_own", "adopted_anonymous",
		"preserved_foreign", "settled_by_default", "defaulted_steps", "diagnostics", "continued_by",
	} {
		if _, ok := got[k]; ok {
			t.Errorf("field %q is present on a reply that never set it", k)
		}
	}
	for k := range replyDefaults {
		if _, ok := got[k]; !ok {
			t.Errorf("always-present field %q is missing", k)
		}
	}
}

func TestReplyJSONRendersGateExpiryAndCountsWhenSet(t *testing.T) {
	t.Parallel()
	expires := time.Date(2026, 10, 9, 9, 14, 2, 511_000_000, time.UTC)
	got := ReplyJSON(&realmv1.Reply{
		Command: "approve",
		Status:  realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED,
		Gate: &realmv1.Gate{
			GateId: "g1", StepName: "approve", Choices: []string{"ship"},
			Display: proto.String("Ship it?"), AgentHint: proto.String("ask"),
			ExpiresAt: timestamppb.New(expires), ClaimToken: proto.String("tok"),
		},
		AdoptedOwn: proto.Int32(2), AdoptedAnonymous: proto.Int32(0), PreservedForeign: proto.Int32(1),
		SettledByDefault: proto.Bool(true), DefaultedSteps: []string{"classify"},
		HasChainedAutoSteps: true,
	})
	want := decode(t, `{
  "command": "approve", "run_id": "", "status": "confirm_required", "context_hint": "",
  "next_actions": [], "warnings": [], "errors": [], "data": {}, "evidence": [],
  "gate": { "gate_id": "g1", "step_name": "approve", "preview": null, "choices": ["ship"],
            "display": "Ship it?", "agent_hint": "ask", "expires_at": "2026-10-09T09:14:02.511Z",
            "claim_token": "tok" },
  "adopted_own": 2, "adopted_anonymous": 0, "preserved_foreign": 1,
  "settled_by_default": true, "defaulted_steps": ["classify"],
  "chained_auto_steps": []
}`)
	assertSameJSON(t, got, want)
}

func TestFormatTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   *timestamppb.Timestamp
		want string
	}{
		{"nil is empty", nil, ""},
		{"milliseconds kept", timestamppb.New(time.Date(2026, 10, 9, 9, 14, 2, 511_900_000, time.UTC)), "2026-10-09T09:14:02.511Z"},
		{"whole second padded", timestamppb.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), "2026-01-02T03:04:05.000Z"},
		{"other zones turned to UTC", timestamppb.New(time.Date(2026, 10, 2, 1, 52, 37, 0, time.FixedZone("X", 2*3600))), "2026-10-01T23:52:37.000Z"},
		{"invalid is empty", &timestamppb.Timestamp{Seconds: 1, Nanos: -1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := FormatTime(tt.in); got != tt.want {
				t.Errorf("FormatTime = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEnumWords(t *testing.T) {
	t.Parallel()
	tests := []struct{ got, want string }{
		{StatusWord(realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED), "confirm_required"},
		{PhaseWord(realmv1.RunPhase_RUN_PHASE_GATE_WAITING), "gate_waiting"},
		{PhaseWord(realmv1.RunPhase_RUN_PHASE_UNSPECIFIED), ""},
		{ActionWord(realmv1.AgentAction_AGENT_ACTION_WAIT_AND_PROCEED), "wait_and_proceed"},
		{ActionWord(realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED), ""},
		{ChannelWord(realmv1.Channel_CHANNEL_MCP_STDIO), "mcp-stdio"},
		{ChannelWord(realmv1.Channel_CHANNEL_RUN), "run"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatalf("structpb.NewStruct: %v", err)
	}
	return s
}

func mustValue(t *testing.T, v any) *structpb.Value {
	t.Helper()
	pv, err := structpb.NewValue(v)
	if err != nil {
		t.Fatalf("structpb.NewValue: %v", err)
	}
	return pv
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("want JSON does not parse: %v\n%s", err, s)
	}
	return m
}

// assertSameJSON compares got and want as JSON values (numbers as float64,
// key order ignored), printing both on a difference.
func assertSameJSON(t *testing.T, got, want map[string]any) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("marshal got: %v", err)
	}
	var norm map[string]any
	if err := json.Unmarshal(b, &norm); err != nil {
		t.Fatalf("unmarshal got: %v", err)
	}
	if !reflect.DeepEqual(norm, want) {
		g, _ := json.MarshalIndent(norm, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("JSON differs\n got: %s\nwant: %s", g, w)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return b
}
