// Package handlers holds the example runner's handlers: the handlers the
// handlers contract shows, each doing what its example does, so a workflow
// can try every outcome (data, a warning, an abort, a plain error, a
// WorkflowError retried or not, a time limit) against a real runner.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// Source names this package in the message that refuses a handler name
// declared both here and in a manifest.
const Source = "services/example-runner/handlers"

// Registrations are the handlers the example runner serves.
func Registrations() []runner.Registration {
	regs := []runner.Registration{
		{Name: "order_total", Handler: handler.Func(OrderTotal)},
		{Name: "show", Handler: handler.Func(Show)},
		{Name: "needs", Handler: handler.Func(Needs), UsesResources: []string{"fetch", "parse"}},
		{Name: "check_records", Handler: handler.Func(CheckRecords)},
		{Name: "close_account", Handler: handler.Func(CloseAccount)},
		{Name: "find_order", Handler: handler.Func(FindOrder)},
		{Name: "throws", Handler: handler.Func(Throws)},
		{Name: "flaky", Handler: handler.Func(Flaky)},
		{Name: "slow", Handler: handler.Func(Slow)},
	}
	for i := range regs {
		regs[i].Source = Source
	}
	return regs
}

// Registry is what a deployment manifest's `use` may name.
func Registry() map[string]handler.Handler {
	return map[string]handler.Handler{"makeTotal": MakeTotal{}}
}

// number reads a JSON number from m[key].
func number(m map[string]any, key string) (float64, bool) {
	v, ok := m[key].(float64)
	return v, ok
}

// invalid is the error for an input or config value of the wrong kind: the
// caller has to give another value, so it is not retried.
func invalid(where, field, want string, got any) error {
	e := handler.NewWorkflowError(errcode.ValidationInputSchema,
		fmt.Sprintf("%s.%s must be %s, got %v", where, field, want, got))
	e.Details = map[string]any{"field": where + "." + field}
	return e
}

// OrderTotal is the contract's code-registered handler: the total is the
// input's quantity times the step config's unit_price.
func OrderTotal(_ context.Context, in handler.Inputs, sc handler.StepContext) (handler.Result, error) {
	qty, ok := number(in.Params, "quantity")
	if !ok {
		return handler.Result{}, invalid("params", "quantity", "a number", in.Params["quantity"])
	}
	price, ok := number(sc.Config, "unit_price")
	if !ok {
		return handler.Result{}, invalid("config", "unit_price", "a number", sc.Config["unit_price"])
	}
	return handler.Data(map[string]any{"total": qty * price}), nil
}

// MakeTotal is the contract's manifest factory (`use: makeTotal`): the
// handler it builds returns 4 × the entry's configured unit_price, exactly as
// the contract's example does.
type MakeTotal struct{}

// Configure builds the handler for one manifest entry.
func (MakeTotal) Configure(_ string, config map[string]any) (handler.Handler, error) {
	price, ok := number(config, "unit_price")
	if !ok {
		return nil, fmt.Errorf("config.unit_price must be a number, got %v", config["unit_price"])
	}
	return handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
		return handler.Data(map[string]any{"total": 4 * price}), nil
	}), nil
}

// Execute refuses to run unconfigured: MakeTotal is only a factory.
func (MakeTotal) Execute(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
	return handler.Result{}, errors.New("makeTotal is a factory: name it in realm.yaml with a config block")
}

// Show returns what it received, in the shape the contract prints it.
func Show(_ context.Context, in handler.Inputs, sc handler.StepContext) (handler.Result, error) {
	return handler.Data(map[string]any{
		"inputs": map[string]any{"params": in.Params},
		"context": map[string]any{
			"run_id": sc.RunID, "run_params": sc.RunParams, "config": sc.Config, "resources": sc.Resources,
		},
	}), nil
}

// Needs declares uses_resources [fetch, parse] and says which of the two
// steps' outputs it found.
func Needs(_ context.Context, _ handler.Inputs, sc handler.StepContext) (handler.Result, error) {
	_, fetch := sc.Resources["fetch"]
	_, parse := sc.Resources["parse"]
	return handler.Data(map[string]any{"fetch": fetch, "parse": parse}), nil
}

// CheckRecords counts params.records and completes with a warning when a
// record has no email address.
func CheckRecords(_ context.Context, in handler.Inputs, _ handler.StepContext) (handler.Result, error) {
	records, ok := in.Params["records"].([]any)
	if !ok {
		return handler.Result{}, invalid("params", "records", "a list", in.Params["records"])
	}
	missing := 0
	for _, r := range records {
		if rec, _ := r.(map[string]any); rec["email"] == nil || rec["email"] == "" {
			missing++
		}
	}
	out := map[string]any{"checked": len(records)}
	switch missing {
	case 0:
		return handler.Data(out), nil
	case 1:
		return handler.Warn(out, "One record had no email address."), nil
	default:
		return handler.Warn(out, fmt.Sprintf("%d records had no email address.", missing)), nil
	}
}

// CloseAccount aborts the run.
func CloseAccount(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
	return handler.AbortRun("The account is closed."), nil
}

// FindOrder fails with the contract's WorkflowError: the order is not in the
// system, which no retry changes.
func FindOrder(_ context.Context, in handler.Inputs, _ handler.StepContext) (handler.Result, error) {
	order, _ := in.Params["order"].(string)
	return handler.Result{}, &handler.WorkflowError{
		Message:     fmt.Sprintf("Order %s is not in the system.", order),
		Code:        "RESOURCE_NOT_FOUND",
		Category:    errcode.CategoryResource,
		AgentAction: errcode.ActionReportToUser,
		Retryable:   false,
		Details:     map[string]any{"order": order},
	}
}

// Throws fails with a plain error, which is never retried.
func Throws(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
	return handler.Result{}, errors.New("the billing service is down")
}

// Flaky is rate limited on its first 2 attempts (a retryable
// WorkflowError), then completes.
func Flaky(_ context.Context, _ handler.Inputs, sc handler.StepContext) (handler.Result, error) {
	if sc.Attempt <= 2 {
		return handler.Result{}, handler.NewWorkflowError(errcode.ServiceRateLimited, "rate limited")
	}
	return handler.Data(map[string]any{"attempt": sc.Attempt}), nil
}

// SlowFor is how long Slow works.
var SlowFor = 4 * time.Second

// Slow works for 4 seconds, stopping early when the step's time limit
// passes (with timeout_seconds: 1 the step fails after 1 second).
func Slow(ctx context.Context, _ handler.Inputs, _ handler.StepContext) (handler.Result, error) {
	t := time.NewTimer(SlowFor)
	defer t.Stop()
	select {
	case <-t.C:
		return handler.Data(map[string]any{"waited_ms": SlowFor.Milliseconds()}), nil
	case <-ctx.Done():
		return handler.Result{}, ctx.Err()
	}
}
