package handler_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
)

// A handler computes the step's output from its input and config.
func ExampleFunc() {
	orderTotal := handler.Func(func(_ context.Context, in handler.Inputs, sc handler.StepContext) (handler.Result, error) {
		qty, _ := in.Params["quantity"].(float64)
		price, _ := sc.Config["unit_price"].(float64)
		return handler.Data(map[string]any{"total": qty * price}), nil
	})

	r, err := orderTotal.Execute(context.Background(),
		handler.Inputs{Params: map[string]any{"quantity": 4.0}},
		handler.StepContext{Config: map[string]any{"unit_price": 12.5}})
	fmt.Println(r.Data, err)
	// Output: map[total:50] <nil>
}

// A WorkflowError tells the engine the failure's code and whether the step
// may be tried again; the runner finds it with errors.As, even wrapped.
func ExampleWorkflowError() {
	lookup := func(order string) error {
		return &handler.WorkflowError{
			Message:     fmt.Sprintf("Order %s is not in the system.", order),
			Code:        "RESOURCE_NOT_FOUND",
			Category:    errcode.CategoryResource,
			AgentAction: errcode.ActionReportToUser,
			Retryable:   false,
			Details:     map[string]any{"order": order},
		}
	}
	err := fmt.Errorf("price step: %w", lookup("A-17"))

	var werr *handler.WorkflowError
	if errors.As(err, &werr) {
		fmt.Println(werr.Code, werr.Retryable, werr.Message)
	}
	// Output: RESOURCE_NOT_FOUND false Order A-17 is not in the system.
}

// A retryable error built from the catalogue: SERVICE_RATE_LIMITED is
// retryable there, so a step with a retry block tries again.
func ExampleNewWorkflowError() {
	err := handler.NewWorkflowError(errcode.ServiceRateLimited, "rate limited")
	fmt.Println(err.Category, err.AgentAction, err.Retryable)
	// Output: SERVICE wait_and_proceed true
}

// Warn completes the step and records a warning with it; AbortRun ends the
// run as aborted.
func ExampleWarn() {
	check := func(records []map[string]any) handler.Result {
		if len(records) == 0 {
			return handler.AbortRun("There are no records to check.")
		}
		missing := 0
		for _, r := range records {
			if r["email"] == nil {
				missing++
			}
		}
		out := map[string]any{"checked": len(records)}
		if missing > 0 {
			return handler.Warn(out, fmt.Sprintf("%d record(s) had no email address.", missing))
		}
		return handler.Data(out)
	}
	r := check([]map[string]any{{"email": "a@example.com"}, {}, {"email": "c@example.com"}})
	fmt.Println(r.Data, r.Warn)
	fmt.Println(check(nil).Abort.Message)
	// Output:
	// map[checked:3] 1 record(s) had no email address.
	// There are no records to check.
}

// The helpers read what earlier steps produced.
func ExamplePartitionBySubstring() {
	sc := handler.StepContext{Resources: map[string]any{
		"fetch":   map[string]any{"text": "Payment is due in 30 days."},
		"extract": map[string]any{"clauses": []any{map[string]any{"quote": "due in 30 days"}, map[string]any{"quote": "due in 60 days"}}},
	}}
	text, _ := handler.ResolveResource(sc.Resources, "fetch", "text")
	clauses, _ := handler.ResolveResource(sc.Resources, "extract", "clauses")
	candidates, _ := clauses.([]any)
	source, _ := text.(string)

	p := handler.PartitionBySubstring(candidates, "quote", source)
	fmt.Printf("%+v\n", handler.CountResults(p.Accepted, p.Rejected))
	// Output: {AcceptedCount:1 RejectedCount:1 CandidatesFound:2}
}

// CompareStrings reports false as its second result for an unknown mode.
func ExampleCompareStrings() {
	fmt.Println(handler.CompareStrings("INV-2041", `^INV-\d+$`, handler.CompareRegex))
	fmt.Println(handler.CompareStrings("INV-2041", "INV", "other"))
	// Output:
	// true true
	// false false
}

// Typed decodes the step's params into a struct; params that do not fit
// fail the step with VALIDATION_INPUT_SCHEMA, naming the field, and the
// function is not called.
func ExampleTyped() {
	type refund struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
	}
	approve := handler.Typed(func(_ context.Context, in refund, _ handler.StepContext) (map[string]any, error) {
		return map[string]any{"order": in.Order, "approved": in.Amount <= 100}, nil
	})

	r, err := approve.Execute(context.Background(), handler.Inputs{Params: map[string]any{"order": "A-17", "amount": 40.0}}, handler.StepContext{})
	fmt.Println(r.Data, err)

	_, err = approve.Execute(context.Background(), handler.Inputs{Params: map[string]any{"amount": "forty"}}, handler.StepContext{})
	var werr *handler.WorkflowError
	if errors.As(err, &werr) {
		fmt.Println(werr.Code, werr.Details["field"], "—", werr.Message)
	}
	// Output:
	// map[approved:true order:A-17] <nil>
	// VALIDATION_INPUT_SCHEMA params.amount — params.amount must be a number, got string
}

// TypedConfig decodes the step's config block too; returning a Result
// keeps Warn and AbortRun at hand.
func ExampleTypedConfig() {
	type in struct {
		Quantity int `json:"quantity"`
	}
	type config struct {
		UnitPrice float64 `json:"unit_price"`
		Limit     float64 `json:"limit"`
	}
	total := handler.TypedConfig(func(_ context.Context, in in, c config, _ handler.StepContext) (handler.Result, error) {
		t := float64(in.Quantity) * c.UnitPrice
		if t > c.Limit {
			return handler.Warn(map[string]any{"total": t}, "over the limit: priced by hand"), nil
		}
		return handler.Data(map[string]any{"total": t}), nil
	})
	r, _ := total.Execute(context.Background(),
		handler.Inputs{Params: map[string]any{"quantity": 100.0}},
		handler.StepContext{Config: map[string]any{"unit_price": 12.5, "limit": 1000.0}})
	fmt.Println(r.Data, r.Warn)
	// Output: map[total:1250] over the limit: priced by hand
}
