package reply

import (
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func ts(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err) // test fixture typo
	}
	return timestamppb.New(t)
}

func TestRunStateJSONMatchesSeedExamples(t *testing.T) {
	t.Parallel()
	gateAction := func(t *testing.T) *realmv1.NextAction {
		return &realmv1.NextAction{
			Instruction: &realmv1.Instruction{
				Tool:         "submit_human_response",
				ParamsJson:   mustJSON(t, map[string]any{"run_id": runA, "gate_id": "00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e"}),
				CallWithJson: mustJSON(t, map[string]any{"run_id": runA, "gate_id": "00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e", "choice": "<send|discard>"}),
			},
			HumanReadable: "Human review required for step 'draft'. Ask the user to choose one of: send, discard, then call submit_human_response with their choice. The question's text, when its gate declares a message, is get_run_state's pending_gate.resolved_message. The conversation that opened the question passes back the claim_token it was given then, when it was given one.",
			Orientation:   "Run is paused at gate '00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e'. Available choices: send, discard.",
		}
	}
	tests := []struct {
		name  string
		build func(t *testing.T) *realmv1.RunState
		want  string
	}{
		{
			name: "run waiting at a gate",
			build: func(t *testing.T) *realmv1.RunState {
				return &realmv1.RunState{
					RunId:           runA,
					WorkflowId:      "triage",
					RunPhase:        realmv1.RunPhase_RUN_PHASE_GATE_WAITING,
					CompletedSteps:  []string{"classify"},
					InProgressSteps: []string{"draft"},
					PendingGate: &realmv1.PendingGate{
						GateId:   "00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e",
						StepName: "draft",
						Preview:  mustValue(t, map[string]any{"reply": "We have refunded the charge."}),
						Choices:  []string{"send", "discard"},
						OpenedAt: ts("2026-10-01T23:34:09.630Z"),
					},
					EvidenceCount:     2,
					LastStep:          proto.String("draft"),
					CreatedAt:         ts("2026-10-01T23:34:09.429Z"),
					UpdatedAt:         ts("2026-10-01T23:34:09.635Z"),
					Params:            mustStruct(t, map[string]any{"ticket": 101}),
					NextActions:       []*realmv1.NextAction{gateAction(t)},
					NextActionsStatus: "awaiting_human",
					RunVersion:        5,
				}
			},
			want: `{
  "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63",
  "workflow_id": "triage",
  "run_phase": "gate_waiting",
  "terminal_state": false,
  "completed_steps": ["classify"],
  "in_progress_steps": ["draft"],
  "failed_steps": [],
  "skipped_steps": [],
  "pending_gate": {
    "gate_id": "00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e",
    "step_name": "draft",
    "preview": { "reply": "We have refunded the charge." },
    "choices": ["send", "discard"],
    "opened_at": "2026-10-01T23:34:09.630Z"
  },
  "evidence_count": 2,
  "last_step": "draft",
  "created_at": "2026-10-01T23:34:09.429Z",
  "updated_at": "2026-10-01T23:34:09.635Z",
  "params": { "ticket": 101 },
  "next_actions": [
    {
      "instruction": {
        "tool": "submit_human_response",
        "params": {
          "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63",
          "gate_id": "00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e"
        },
        "call_with": {
          "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63",
          "gate_id": "00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e",
          "choice": "<send|discard>"
        }
      },
      "human_readable": "Human review required for step 'draft'. Ask the user to choose one of: send, discard, then call submit_human_response with their choice. The question's text, when its gate declares a message, is get_run_state's pending_gate.resolved_message. The conversation that opened the question passes back the claim_token it was given then, when it was given one.",
      "orientation": "Run is paused at gate '00bb04f5-1bb7-4f38-91c5-14cdb17b3f0e'. Available choices: send, discard."
    }
  ],
  "next_actions_status": "awaiting_human"
}`,
		},
		{
			name: "same run after it completed",
			build: func(t *testing.T) *realmv1.RunState {
				return &realmv1.RunState{
					RunId:             runA,
					WorkflowId:        "triage",
					RunPhase:          realmv1.RunPhase_RUN_PHASE_COMPLETED,
					TerminalState:     true,
					CompletedSteps:    []string{"classify", "draft"},
					EvidenceCount:     3,
					LastStep:          proto.String("draft"),
					CreatedAt:         ts("2026-10-01T23:34:09.429Z"),
					UpdatedAt:         ts("2026-10-01T23:35:00.000Z"),
					Params:            mustStruct(t, map[string]any{"ticket": 101}),
					NextActionsStatus: "skipped_terminal",
					TerminalReason:    proto.String("Workflow completed."),
					SealedByArm:       "complete",
				}
			},
			want: `{
  "run_id": "7da561ee-5987-497d-83a5-1eded6dc9b63",
  "workflow_id": "triage",
  "completed_steps": ["classify", "draft"],
  "in_progress_steps": [],
  "failed_steps": [],
  "skipped_steps": [],
  "evidence_count": 3,
  "last_step": "draft",
  "created_at": "2026-10-01T23:34:09.429Z",
  "updated_at": "2026-10-01T23:35:00.000Z",
  "params": { "ticket": 101 },
  "run_phase": "completed",
  "terminal_state": true,
  "terminal_reason": "Workflow completed.",
  "sealed_by_arm": "complete",
  "next_actions": [],
  "next_actions_status": "skipped_terminal"
}`,
		},
		{
			name: "run a guard aborted, with health extras merged at top level",
			build: func(t *testing.T) *realmv1.RunState {
				return &realmv1.RunState{
					RunId:              "r2",
					WorkflowId:         "quote",
					RunPhase:           realmv1.RunPhase_RUN_PHASE_ABORTED,
					TerminalState:      true,
					SkippedSteps:       []string{"route"},
					NextActionsStatus:  "skipped_terminal",
					SealedByArm:        "guard_abort",
					SealedByStep:       "limit",
					SealedByClassified: proto.Bool(true),
					RerunOf:            "r1",
					AbortContext: mustStruct(t, map[string]any{
						"step_id":       "limit",
						"conditions":    []any{map[string]any{"condition": "quote.amount <= 1000", "resolved_value": 5000, "passed": false}},
						"abort_message": "The amount is over the limit.",
					}),
					DefaultedSteps: []string{"classify"},
					Warnings:       []string{"this run has 1 active run-health finding(s) — see 'run_health' for detail."},
					Extra: mustStruct(t, map[string]any{
						"run_health": []any{map[string]any{"kind": "guard_awaiting_settlement", "step": "limit", "reason": "guard 'limit' is eligible and has not been settled"}},
						// A clash with a typed field never wins.
						"run_id": "not-this",
					}),
				}
			},
			want: `{
  "run_id": "r2",
  "workflow_id": "quote",
  "run_phase": "aborted",
  "terminal_state": true,
  "completed_steps": [],
  "in_progress_steps": [],
  "failed_steps": [],
  "skipped_steps": ["route"],
  "evidence_count": 0,
  "last_step": null,
  "created_at": null,
  "updated_at": null,
  "params": {},
  "next_actions": [],
  "next_actions_status": "skipped_terminal",
  "sealed_by_arm": "guard_abort",
  "sealed_by_step": "limit",
  "sealed_by_classified": true,
  "rerun_of": "r1",
  "abort_context": {
    "step_id": "limit",
    "conditions": [{ "condition": "quote.amount <= 1000", "resolved_value": 5000, "passed": false }],
    "abort_message": "The amount is over the limit."
  },
  "defaulted_steps": ["classify"],
  "warnings": ["this run has 1 active run-health finding(s) — see 'run_health' for detail."],
  "run_health": [{ "kind": "guard_awaiting_settlement", "step": "limit", "reason": "guard 'limit' is eligible and has not been settled" }]
}`,
		},
		{
			name: "pending gate with its stored settings",
			build: func(t *testing.T) *realmv1.RunState {
				return &realmv1.RunState{
					RunId:             "r3",
					WorkflowId:        "gated",
					RunPhase:          realmv1.RunPhase_RUN_PHASE_GATE_WAITING,
					NextActionsStatus: "awaiting_human",
					PendingGate: &realmv1.PendingGate{
						GateId: "g", StepName: "approve", Choices: []string{"ship", "hold"},
						OpenedAt:           ts("2026-10-01T23:34:09.630Z"),
						Owner:              proto.String("ops"),
						ResolvedMessage:    proto.String("Ship the order?"),
						ResolutionMessages: mustStruct(t, map[string]any{"ship": "Shipped."}),
						ExpiresAt:          ts("2026-10-01T23:39:39.676Z"),
						OnExpiry:           proto.String("settle_default"),
						DefaultChoice:      proto.String("hold"),
						ReminderSeconds:    proto.Int32(60),
						ReminderMax:        proto.Int32(3),
					},
				}
			},
			want: `{
  "run_id": "r3", "workflow_id": "gated", "run_phase": "gate_waiting", "terminal_state": false,
  "completed_steps": [], "in_progress_steps": [], "failed_steps": [], "skipped_steps": [],
  "evidence_count": 0, "last_step": null, "created_at": null, "updated_at": null, "params": {},
  "next_actions": [], "next_actions_status": "awaiting_human",
  "pending_gate": {
    "gate_id": "g", "step_name": "approve", "preview": null, "choices": ["ship", "hold"],
    "opened_at": "2026-10-01T23:34:09.630Z", "owner": "ops", "resolved_message": "Ship the order?",
    "resolution_messages": { "ship": "Shipped." }, "expires_at": "2026-10-01T23:39:39.676Z",
    "on_expiry": "settle_default", "default_choice": "hold", "reminder_seconds": 60, "reminder_max": 3
  }
}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertSameJSON(t, RunStateJSON(tt.build(t)), decode(t, tt.want))
		})
	}
}

func TestNilInputsGiveNil(t *testing.T) {
	t.Parallel()
	if ReplyJSON(nil) != nil || RunStateJSON(nil) != nil || HolderJSON(nil) != nil {
		t.Error("nil protobuf message should convert to nil")
	}
}
