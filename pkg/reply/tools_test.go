package reply

import (
	"encoding/json"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestToolRepliesHaveTheSeedsShapes(t *testing.T) {
	t.Parallel()
	refusal := &realmv1.Reply{Command: "abandon_run", RunId: "r", Status: realmv1.ReplyStatus_REPLY_STATUS_ERROR, ErrorCode: "STATE_RUN_TERMINAL"}
	cases := []struct {
		name string
		got  map[string]any
		want string
	}{
		{"list_workflows", ListWorkflowsJSON(&realmv1.ListWorkflowsResponse{Status: "ok", Hint: "h",
			Workflows: []*realmv1.WorkflowSummary{{Id: "triage", Name: "Ticket triage", Version: 1}}}),
			`{"hint":"h","status":"ok","unreadable":[],"warnings":[],"workflows":[{"id":"triage","name":"Ticket triage","version":1}]}`},
		{"list_workflows refusal", ListWorkflowsRefusalJSON("STATE_WORKFLOW_UNREADABLE", "m", nil, "report_to_user"),
			`{"agent_action":"report_to_user","error_code":"STATE_WORKFLOW_UNREADABLE","error_details":{},"errors":["m"],"hint":"","status":"error","unreadable":[],"warnings":[],"workflows":[]}`},
		{"start_run_batch", StartRunBatchJSON(&realmv1.StartRunBatchResponse{
			Started: []*realmv1.BatchStarted{{RunId: "a", IdempotencyKey: "ticket-201", RunPhase: realmv1.RunPhase_RUN_PHASE_RUNNING, ContextHint: "c"}},
			Failed:  []*realmv1.BatchFailed{{Index: 2, IdempotencyKey: "order-9", ErrorCode: "STATE_RUN_ALREADY_ACTIVE", Reason: "busy"}}}),
			`{"failed":[{"error":"busy","error_code":"STATE_RUN_ALREADY_ACTIVE","idempotency_key":"order-9","index":2}],"started":[{"context_hint":"c","deduped":false,"idempotency_key":"ticket-201","next_actions":[],"params":{},"run_id":"a","run_phase":"running","warnings":[]}]}`},
		{"abandon_run", AbandonRunJSON(&realmv1.AbandonRunResponse{RunId: "r", RunPhase: realmv1.RunPhase_RUN_PHASE_ABANDONED, TerminalState: true, TerminalReason: "Ticket withdrawn.", Note: "n"}),
			`{"note":"n","run_id":"r","run_phase":"abandoned","terminal_reason":"Ticket withdrawn.","terminal_state":true}`},
		{"abandon_run refusal has no run_version", AbandonRunJSON(&realmv1.AbandonRunResponse{Refusal: refusal}),
			`{"command":"abandon_run","context_hint":"","data":{},"error_code":"STATE_RUN_TERMINAL","errors":[],"evidence":[],"next_actions":[],"run_id":"r","status":"error","warnings":[]}`},
		{"append_trace", AppendTraceJSON(&realmv1.AppendTraceResponse{Counts: &realmv1.TraceCounts{BufferCount: 1, BufferBytes: 57, LimitCount: 200, LimitBytes: 102400,
			FinalLimitEntries: 100, FinalLimitBytes: 51200, FileCount: 1, FileBytes: 57, FileLimitCount: 400, FileLimitBytes: 204800}}),
			`{"buffer_bytes":57,"buffer_count":1,"file_bytes":57,"file_count":1,"file_limit_bytes":204800,"file_limit_count":400,"final_limit_bytes":51200,"final_limit_entries":100,"limit_bytes":102400,"limit_count":200,"status":"ok"}`},
		{"get_run_state refusal", GetRunStateJSON(&realmv1.GetRunStateResponse{Refusal: refusal}),
			`{"command":"abandon_run","context_hint":"","data":{},"error_code":"STATE_RUN_TERMINAL","errors":[],"evidence":[],"next_actions":[],"run_id":"r","status":"error","warnings":[]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := asJSON(t, tc.got); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	for _, m := range []map[string]any{ListWorkflowsJSON(nil), StartRunBatchJSON(nil), AbandonRunJSON(nil), AppendTraceJSON(nil), GetRunStateJSON(nil)} {
		if m != nil {
			t.Errorf("nil response gave %v", m)
		}
	}
}
