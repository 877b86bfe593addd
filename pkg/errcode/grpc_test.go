package errcode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func errorDetail(t *testing.T, st *status.Status) *realmv1.ErrorDetail {
	t.Helper()
	for _, d := range st.Details() {
		if ed, ok := d.(*realmv1.ErrorDetail); ok {
			return ed
		}
	}
	return nil
}

func TestToStatus(t *testing.T) {
	t.Parallel()
	relayed := status.Error(codes.PermissionDenied, "relayed from another service")
	tests := []struct {
		name       string
		err        error
		wantCode   codes.Code
		wantMsg    string
		wantDetail string // "" means no ErrorDetail expected
		action     realmv1.AgentAction
		retryable  bool
	}{
		{"not found", New(StateRunNotFound, "Run not found: r1"), codes.NotFound, "Run not found: r1", "STATE_RUN_NOT_FOUND", realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER, false},
		{"validation", New(ValidationInputSchema, "Invalid input for step 's'"), codes.InvalidArgument, "Invalid input for step 's'", "VALIDATION_INPUT_SCHEMA", realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT, false},
		{"conflict", New(StateSnapshotMismatch, "Version conflict"), codes.Aborted, "Version conflict", "STATE_SNAPSHOT_MISMATCH", realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER, true},
		{"store outage keeps cause text", Wrap(EngineStoreFailed, io.EOF, ""), codes.Unavailable, "ENGINE_STORE_FAILED: EOF", "ENGINE_STORE_FAILED", realmv1.AgentAction_AGENT_ACTION_STOP, true},
		{"wrapped *Error is found", fmt.Errorf("start: %w", New(StateRunTerminal, "terminal")), codes.FailedPrecondition, "terminal", "STATE_RUN_TERMINAL", realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER, false},
		{"*Error wins over a context cause", Wrap(StepTimeout, context.DeadlineExceeded, "Step 's' timed out after 10ms"), codes.DeadlineExceeded, "Step 's' timed out after 10ms", "STEP_TIMEOUT", realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER, false},
		{"action override travels", New(StateBlocked, "late").WithAgentAction(ActionReportToUser), codes.FailedPrecondition, "late", "STATE_BLOCKED", realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER, false},
		{"unknown project code passes through", New("RESOURCE_NOT_FOUND", "no such file"), codes.Unknown, "no such file", "RESOURCE_NOT_FOUND", realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER, false},
		{"canceled", fmt.Errorf("call: %w", context.Canceled), codes.Canceled, "call: context canceled", "", 0, false},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded, "context deadline exceeded", "", 0, false},
		{"relayed status unchanged", relayed, codes.PermissionDenied, "relayed from another service", "", 0, false},
		{"wrapped relayed status keeps its own message", fmt.Errorf("calling engine: %w", relayed), codes.PermissionDenied, "relayed from another service", "", 0, false},
		{"relayed realm status keeps its detail", fmt.Errorf("calling engine: %w", ToStatus(New(StateRunBusy, "busy")).Err()), codes.Aborted, "busy", "STATE_RUN_BUSY", realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER, true},
		{"plain error is internal", errors.New("boom"), codes.Internal, "boom", "ENGINE_INTERNAL", realmv1.AgentAction_AGENT_ACTION_STOP, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := ToStatus(tc.err)
			if st.Code() != tc.wantCode || st.Message() != tc.wantMsg {
				t.Errorf("status = %v %q, want %v %q", st.Code(), st.Message(), tc.wantCode, tc.wantMsg)
			}
			d := errorDetail(t, st)
			if tc.wantDetail == "" {
				if d != nil {
					t.Errorf("unexpected ErrorDetail %v", d)
				}
				return
			}
			if d == nil {
				t.Fatal("no ErrorDetail")
			}
			info, _ := Code(tc.wantDetail).Info()
			if d.GetCode() != tc.wantDetail || d.GetCategory() != string(info.Category) ||
				d.GetAgentAction() != tc.action || d.GetRetryable() != tc.retryable {
				t.Errorf("detail = %v", d)
			}
			if d.GetDetails() == nil {
				t.Error("details must be an object, never absent")
			}
		})
	}
}

func TestToStatusOfNilIsOK(t *testing.T) {
	t.Parallel()
	if st := ToStatus(nil); st.Code() != codes.OK || st.Err() != nil {
		t.Errorf("ToStatus(nil) = %v", st)
	}
}

func TestStatusRoundTrip(t *testing.T) {
	t.Parallel()
	rateLimited := New(ServiceRateLimited, "slow down").WithDetails(map[string]any{"retry_after": 30})
	tests := []struct {
		name string
		in   *Error
		want *Error
	}{
		{"plain code", New(StateRunNotFound, "Run not found: r1"), New(StateRunNotFound, "Run not found: r1")},
		{
			"details of every JSON kind",
			New(ValidationInputSchema, "Invalid input for step 's'").WithDetails(map[string]any{
				"errors":     []any{map[string]any{"instancePath": "/a", "keyword": "required"}},
				"rejections": 2, "threshold": 6, "final": false, "note": nil,
			}),
			New(ValidationInputSchema, "Invalid input for step 's'").WithDetails(map[string]any{
				"errors":     []any{map[string]any{"instancePath": "/a", "keyword": "required"}},
				"rejections": 2.0, "threshold": 6.0, "final": false, "note": nil,
			}),
		},
		{
			"typed values go through JSON",
			New(ValidationBatchItems, "start_run_batch: 2 item(s) failed schema validation").WithDetails(map[string]any{
				"names": []string{"a", "b"}, "failure": struct {
					Index  int    `json:"index"`
					Reason string `json:"reason"`
				}{1, "bad"},
			}),
			New(ValidationBatchItems, "start_run_batch: 2 item(s) failed schema validation").WithDetails(map[string]any{
				"names": []any{"a", "b"}, "failure": map[string]any{"index": 1.0, "reason": "bad"},
			}),
		},
		{"rate limit keeps retry_after", rateLimited, New(ServiceRateLimited, "slow down").WithDetails(map[string]any{"retry_after": 30.0})},
		{"action override survives", New(StateBlocked, "late").WithAgentAction(ActionReportToUser), New(StateBlocked, "late").WithAgentAction(ActionReportToUser)},
		{"retryable override survives", New(EngineStoreFailed, "down").WithRetryable(false), New(EngineStoreFailed, "down").WithRetryable(false)},
		{"cause becomes message text", Wrap(EngineStoreFailed, io.EOF, ""), New(EngineStoreFailed, "ENGINE_STORE_FAILED: EOF")},
		{"unknown code", New("RESOURCE_NOT_FOUND", "gone"), New("RESOURCE_NOT_FOUND", "gone")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Through Err() and a wrapping layer, as a client sees it.
			wire := fmt.Errorf("rpc: %w", ToStatus(tc.in).Err())
			got, ok := FromStatus(wire)
			if !ok {
				t.Fatal("FromStatus found no ErrorDetail")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("round trip\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestDetailsThatCannotBeEncodedLeaveANote(t *testing.T) {
	t.Parallel()
	st := ToStatus(New(EngineInternal, "x").WithDetails(map[string]any{"ch": make(chan int)}))
	got, ok := FromStatus(st.Err())
	if !ok {
		t.Fatal("no ErrorDetail")
	}
	if _, noted := got.Details["details_unencodable"]; !noted || len(got.Details) != 1 {
		t.Errorf("details = %v", got.Details)
	}
}

func TestFromStatusNeedsAnErrorDetail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
	}{
		{"nil", nil},
		{"plain error", errors.New("STATE_RUN_NOT_FOUND: Run not found: r1")},
		{"status without detail", status.Error(codes.NotFound, "STATE_RUN_NOT_FOUND")},
		{"canceled status", ToStatus(context.Canceled).Err()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if e, ok := FromStatus(tc.err); ok || e != nil {
				t.Errorf("FromStatus = %v, %v; want nil, false", e, ok)
			}
		})
	}
}

func TestAgentActionEnumAndStringAreInverse(t *testing.T) {
	t.Parallel()
	seen := map[realmv1.AgentAction]bool{}
	for _, a := range AgentActions() {
		enum := AgentActionEnum(string(a))
		if enum == realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED || seen[enum] {
			t.Errorf("%s maps to %v", a, enum)
		}
		seen[enum] = true
		if back := AgentActionString(enum); back != string(a) {
			t.Errorf("%v maps back to %q, want %q", enum, back, a)
		}
	}
	// Every enum value but UNSPECIFIED has a word.
	for v := range realmv1.AgentAction_name {
		a := realmv1.AgentAction(v)
		if a != realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED && !seen[a] {
			t.Errorf("enum %v has no word", a)
		}
	}
}

func TestAgentActionEdgeCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		word string
		want realmv1.AgentAction
	}{
		{"wait_for_service", realmv1.AgentAction_AGENT_ACTION_WAIT_FOR_HUMAN},
		{"await", realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED},
		{"", realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED},
		{"STOP", realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED},
	}
	for _, tc := range tests {
		if got := AgentActionEnum(tc.word); got != tc.want {
			t.Errorf("AgentActionEnum(%q) = %v, want %v", tc.word, got, tc.want)
		}
	}
	if got := AgentActionString(realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED); got != "" {
		t.Errorf("UNSPECIFIED maps to %q", got)
	}
	if got := AgentActionString(realmv1.AgentAction(99)); got != "" {
		t.Errorf("unknown enum maps to %q", got)
	}
}
