package handler

import (
	"fmt"

	"github.com/realm-go/realm/pkg/errcode"
)

// WorkflowError is a handler failure that steers the engine: its code,
// category and agent_action reach the caller, and a Retryable one is tried
// again when the step has a retry block (any other error never is). Return
// it (or wrap it with %w); the runner finds it with errors.As.
type WorkflowError struct {
	// Message is the step's failure, verbatim.
	Message string
	// Code is one of Realm's error codes (codes outside the catalogue pass
	// through unchanged).
	Code errcode.Code
	// Category is NETWORK, SERVICE, STATE, VALIDATION, ENGINE or RESOURCE.
	Category errcode.Category
	// AgentAction is what the caller should do: report_to_user,
	// provide_input, resolve_precondition, stop, wait_for_service,
	// wait_and_proceed or await.
	AgentAction errcode.AgentAction
	// Retryable says whether the step may be tried again.
	Retryable bool
	// Details is anything else about the failure (a JSON object).
	Details map[string]any
	// Err is the cause, for errors.Is/As in the handler's own code; it is
	// not sent to the engine.
	Err error
}

// NewWorkflowError returns a WorkflowError with code and message whose
// category, agent_action and retryable flag are the catalogue's defaults for
// code (empty and false for a code outside the catalogue). Change the fields
// to raise it differently.
func NewWorkflowError(code errcode.Code, message string) *WorkflowError {
	e := &WorkflowError{Message: message, Code: code}
	if info, ok := code.Info(); ok {
		e.Category, e.AgentAction, e.Retryable = info.Category, info.AgentAction, info.Retryable
	}
	return e
}

// Error returns the message, or the code when there is none.
func (e *WorkflowError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Code, e.Err)
	}
	return string(e.Code)
}

// Unwrap returns the cause.
func (e *WorkflowError) Unwrap() error { return e.Err }
