package errcode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"message wins", New(StateRunNotFound, "Run not found: r1"), "Run not found: r1"},
		{"wrap with message keeps message", Wrap(EngineStoreFailed, io.EOF, "Failed to load run from store: EOF"), "Failed to load run from store: EOF"},
		{"wrap without message names code and cause", Wrap(EngineStoreFailed, io.EOF, ""), "ENGINE_STORE_FAILED: EOF"},
		{"bare code", &Error{Code: EngineInternal}, "ENGINE_INTERNAL"},
		{"newf formats", Newf(StepNotFound, "Step '%s' not found in workflow '%s'.", "s1", "wf"), "Step 's1' not found in workflow 'wf'."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestErrorUnwrapsToItsCause(t *testing.T) {
	t.Parallel()
	wrapped := Wrap(EngineStoreFailed, context.DeadlineExceeded, "")
	if !errors.Is(wrapped, context.DeadlineExceeded) {
		t.Error("Wrap lost its cause")
	}
	formatted := Newf(EngineStoreFailed, "Failed to load run from store: %w", io.ErrUnexpectedEOF)
	if !errors.Is(formatted, io.ErrUnexpectedEOF) {
		t.Error("Newf %w did not wrap")
	}
	if formatted.Message != "Failed to load run from store: unexpected EOF" {
		t.Errorf("Newf message %q", formatted.Message)
	}
	if Newf(EngineInternal, "plain %d", 1).Err != nil {
		t.Error("Newf without %w set a cause")
	}
}

func TestWithDetailsMergesWithoutTouchingTheOriginal(t *testing.T) {
	t.Parallel()
	base := New(ValidationBatchTooLarge, "too many").WithDetails(map[string]any{"count": 101})
	more := base.WithDetails(map[string]any{"max_items": 100, "count": 150})
	if base.Details["count"] != 101 || len(base.Details) != 1 {
		t.Errorf("original changed: %v", base.Details)
	}
	if more.Details["count"] != 150 || more.Details["max_items"] != 100 {
		t.Errorf("merged details %v", more.Details)
	}
	if more.Code != ValidationBatchTooLarge || more.Message != "too many" {
		t.Errorf("copy lost fields: %+v", more)
	}
}

func TestActionAndRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       *Error
		action    AgentAction
		retryable bool
	}{
		{"catalogue defaults", New(StateSnapshotMismatch, "x"), ActionReportToUser, true},
		{"action override", New(StateBlocked, "x").WithAgentAction(ActionReportToUser), ActionReportToUser, false},
		{"retryable override", New(ServiceRateLimited, "x").WithRetryable(false), ActionWaitAndProceed, false},
		{"unknown code defaults to report_to_user, not retryable", New("RESOURCE_NOT_FOUND", "x"), ActionReportToUser, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.err.Action(); got != tc.action {
				t.Errorf("Action() = %s, want %s", got, tc.action)
			}
			if got := tc.err.IsRetryable(); got != tc.retryable {
				t.Errorf("IsRetryable() = %v, want %v", got, tc.retryable)
			}
		})
	}
}

func TestAsAndHasCodeFindErrorsInTheChain(t *testing.T) {
	t.Parallel()
	inner := New(StateRunNotFound, "Run not found: r1")
	outer := Wrap(EngineStoreFailed, inner, "")
	tests := []struct {
		name     string
		err      error
		wantCode Code
		has      []Code
		hasNot   []Code
	}{
		{"nil", nil, "", nil, []Code{StateRunNotFound}},
		{"plain error", io.EOF, "", nil, []Code{EngineInternal}},
		{"direct", inner, StateRunNotFound, []Code{StateRunNotFound}, []Code{EngineStoreFailed}},
		{"behind fmt.Errorf", fmt.Errorf("get: %w", inner), StateRunNotFound, []Code{StateRunNotFound}, nil},
		{"outermost code wins for As, HasCode sees both", outer, EngineStoreFailed, []Code{EngineStoreFailed, StateRunNotFound}, nil},
		{"inside errors.Join", errors.Join(io.EOF, inner), StateRunNotFound, []Code{StateRunNotFound}, []Code{EngineStoreFailed}},
		{"typed nil pointer", (*Error)(nil), "", nil, []Code{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, ok := As(tc.err)
			if ok != (tc.wantCode != "") {
				t.Fatalf("As ok = %v", ok)
			}
			if ok && e.Code != tc.wantCode {
				t.Errorf("As code = %s, want %s", e.Code, tc.wantCode)
			}
			if got := CodeOf(tc.err); got != tc.wantCode {
				t.Errorf("CodeOf = %q, want %q", got, tc.wantCode)
			}
			for _, c := range tc.has {
				if !HasCode(tc.err, c) {
					t.Errorf("HasCode(%s) = false", c)
				}
			}
			for _, c := range tc.hasNot {
				if HasCode(tc.err, c) {
					t.Errorf("HasCode(%s) = true", c)
				}
			}
		})
	}
}
