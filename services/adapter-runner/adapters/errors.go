package adapters

import (
	"errors"
	"fmt"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
)

// fail is a WorkflowError with code's catalogue defaults (spec §13.4),
// the message and details given.
func fail(code errcode.Code, details map[string]any, format string, args ...any) *handler.WorkflowError {
	e := handler.NewWorkflowError(code, fmt.Sprintf(format, args...))
	e.Details = details
	return e
}

// withAction changes the error's agent_action where an adapter raises a
// code differently from the catalogue's default (the http adapter's 4xx).
func withAction(e *handler.WorkflowError, a errcode.AgentAction) *handler.WorkflowError {
	e.AgentAction = a
	return e
}

// invalid is ADAPTER_VALIDATION_FAILED: bad params or config, found before
// any request was sent.
func invalid(format string, args ...any) *handler.WorkflowError {
	return fail(errcode.AdapterValidationFailed, nil, format, args...)
}

// unsupported is ADAPTER_OP_UNSUPPORTED for a service_method or operation
// the adapter lacks.
func unsupported(format string, args ...any) *handler.WorkflowError {
	return fail(errcode.AdapterOpUnsupported, nil, format, args...)
}

// aborted is STEP_ABORTED: the step's time limit passed (ctx ended) while
// the adapter was waiting or its request was in flight.
func aborted(what string, err error) *handler.WorkflowError {
	e := fail(errcode.StepAborted, nil, "%s was cancelled because the step's time limit passed", what)
	e.Err = err
	return e
}

// asWorkflowError is err's WorkflowError, nil when it is a plain error.
func asWorkflowError(err error) *handler.WorkflowError {
	var we *handler.WorkflowError
	if errors.As(err, &we) {
		return we
	}
	return nil
}
