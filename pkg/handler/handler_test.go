package handler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
)

func TestResultConstructorsSayWhatTheHandlerReturned(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		r         handler.Result
		wantData  string // JSON; "" for nil
		wantWarn  string
		wantAbort string
	}{
		{"Data carries any JSON value", handler.Data([]any{1, 2}), `[1,2]`, "", ""},
		{"Empty is an empty object", handler.Empty(), `{}`, "", ""},
		{"Warn keeps data and message", handler.Warn(map[string]any{"checked": 3}, "One record had no email address."), `{"checked":3}`, "One record had no email address.", ""},
		{"AbortRun carries the cause", handler.AbortRun("The account is closed."), "", "", "The account is closed."},
		{"the zero Result has no data, recorded as {}", handler.Result{}, "", "", ""},
		{"a warning alone has no data", handler.Result{Warn: "w"}, "", "w", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.wantData == "" {
				if tt.r.Data != nil {
					t.Errorf("Data = %v, want nil", tt.r.Data)
				}
			} else {
				sameJSON(t, tt.r.Data, tt.wantData)
			}
			if tt.r.Warn != tt.wantWarn {
				t.Errorf("Warn = %q, want %q", tt.r.Warn, tt.wantWarn)
			}
			var abort string
			if tt.r.Abort != nil {
				abort = tt.r.Abort.Message
			}
			if abort != tt.wantAbort {
				t.Errorf("Abort = %q, want %q", abort, tt.wantAbort)
			}
		})
	}
}

func TestFuncIsAHandler(t *testing.T) {
	t.Parallel()
	var h handler.Handler = handler.Func(func(_ context.Context, in handler.Inputs, sc handler.StepContext) (handler.Result, error) {
		return handler.Data(map[string]any{"order": in.Params["order"], "run": sc.RunID}), nil
	})
	r, err := h.Execute(context.Background(), handler.Inputs{Params: map[string]any{"order": "A-17"}}, handler.StepContext{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, r.Data, `{"order":"A-17","run":"r1"}`)
}

func TestWorkflowErrorIsFoundThroughWrapping(t *testing.T) {
	t.Parallel()
	cause := errors.New("connection reset")
	werr := &handler.WorkflowError{
		Message: "the ledger is unreachable", Code: errcode.NetworkUnreachable,
		Category: errcode.CategoryNetwork, AgentAction: "wait_for_service", Retryable: true, Err: cause,
	}
	wrapped := fmt.Errorf("posting invoice: %w", werr)

	var got *handler.WorkflowError
	if !errors.As(wrapped, &got) || got != werr {
		t.Fatalf("errors.As did not find the WorkflowError in %v", wrapped)
	}
	if !errors.Is(wrapped, cause) {
		t.Error("the cause is not reachable with errors.Is")
	}
	if got.Error() != "the ledger is unreachable" {
		t.Errorf("Error() = %q", got.Error())
	}
}

func TestNewWorkflowErrorTakesCatalogueDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		code          errcode.Code
		wantCategory  errcode.Category
		wantAction    errcode.AgentAction
		wantRetryable bool
	}{
		{"a retryable catalogue code", errcode.ServiceRateLimited, errcode.CategoryService, errcode.ActionWaitAndProceed, true},
		{"a non-retryable catalogue code", errcode.ValidationInputSchema, errcode.CategoryValidation, errcode.ActionProvideInput, false},
		{"a code outside the catalogue keeps empty defaults", "RESOURCE_NOT_FOUND", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := handler.NewWorkflowError(tt.code, "msg")
			if e.Code != tt.code || e.Message != "msg" || e.Category != tt.wantCategory || e.AgentAction != tt.wantAction || e.Retryable != tt.wantRetryable {
				t.Errorf("NewWorkflowError = %+v", e)
			}
		})
	}
}

func TestWorkflowErrorMessageFallsBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *handler.WorkflowError
		want string
	}{
		{"the message when set", &handler.WorkflowError{Message: "m", Code: "C"}, "m"},
		{"the code and cause without a message", &handler.WorkflowError{Code: "C", Err: errors.New("why")}, "C: why"},
		{"the code alone", &handler.WorkflowError{Code: "C"}, "C"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}
