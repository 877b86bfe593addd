// Package handler is the Go SDK for Realm step handlers: the code an `auto`
// step (or a finalizer) runs, served to the engine by a runner (package
// runner).
//
// A handler gets the step's input and context and returns a Result or an
// error. What each outcome does to the step and the run is decided by the
// engine, per the handlers contract:
//
//	returned                         the step    the run      recorded output
//	Data(v)                          completes   goes on      v (any JSON value)
//	Empty()                          completes   goes on      {}
//	Warn(v, msg)                     completes   goes on      v; msg kept as the step's warn
//	AbortRun(msg)                    skipped     aborted      {"aborted":true,"abort_message":msg}
//	Result{} (the zero value)        completes   goes on      {}
//	a plain error                    fails       failed       (ENGINE_HANDLER_FAILED, never retried)
//	a *WorkflowError                 fails       failed       (its own code; retried when Retryable
//	                                                           and the step has a retry block)
//
// The zero Result completes the step with the output {}, as Empty() does: a
// Go handler that returns Result{} with a nil error has succeeded, so it
// cannot fail a step by accident. (A JavaScript handler that returns
// undefined still fails its step; Go has no such value to return.) A
// failure is always an error: a plain one, or a *WorkflowError with its
// code.
//
// Typed and TypedConfig decode the step's params and config into structs,
// so a handler reads fields instead of asserting map values:
//
//	type order struct {
//		Quantity int `json:"quantity"`
//	}
//	type price struct {
//		UnitPrice float64 `json:"unit_price"`
//	}
//	total := handler.TypedConfig(func(_ context.Context, in order, c price, _ handler.StepContext) (map[string]float64, error) {
//		return map[string]float64{"total": float64(in.Quantity) * c.UnitPrice}, nil
//	})
package handler

import "context"

// Handler is code a step runs. Execute is called once per attempt. ctx
// carries the attempt's deadline (the step's timeout_seconds): when it is
// done the engine has stopped waiting, so long work should watch ctx.Done().
type Handler interface {
	Execute(ctx context.Context, in Inputs, sc StepContext) (Result, error)
}

// Func adapts a function to Handler.
type Func func(ctx context.Context, in Inputs, sc StepContext) (Result, error)

// Execute calls f.
func (f Func) Execute(ctx context.Context, in Inputs, sc StepContext) (Result, error) {
	return f(ctx, in, sc)
}

// Inputs is the step's input.
type Inputs struct {
	// Params is what the step's input_map built; {} without an input_map.
	Params map[string]any
}

// StepContext is what the engine tells a handler about the run.
type StepContext struct {
	RunID string
	// Step is the name of the step being run.
	Step string
	// RunParams are the parameters the run was started with.
	RunParams map[string]any
	// Config is the step's config block; {} if the step has none.
	Config map[string]any
	// Resources holds the outputs of the steps that have run, by step name,
	// plus "$settlement" (how each earlier step ended). Read it with
	// ResolveResource.
	Resources map[string]any
	// Attempt is the attempt number, 1 for the first try.
	Attempt int
}

// Result is what a handler returns. Build it with Data, Empty, Warn or
// AbortRun; the zero Result is Empty().
type Result struct {
	// Data is the step's output: any JSON value (maps, slices, strings,
	// numbers, bools, or a value encoding/json can marshal). nil records
	// the output {}.
	Data any
	// Warn is recorded with the step; the step still completes.
	Warn string
	// Abort, when set, ends the run as aborted; Data is then dropped.
	Abort *Abort
}

// Abort asks the engine to end the run as aborted.
type Abort struct {
	Message string
}

// Data completes the step with output v.
func Data(v any) Result { return Result{Data: v} }

// Empty completes the step with the output {}.
func Empty() Result { return Result{Data: map[string]any{}} }

// Warn completes the step with output v and records msg as its warning.
func Warn(v any, msg string) Result { return Result{Data: v, Warn: msg} }

// AbortRun ends the run as aborted with msg as the cause.
func AbortRun(msg string) Result { return Result{Abort: &Abort{Message: msg}} }

// Configurable is a handler a deployment manifest (realm.yaml) can build: the
// Go counterpart of the factory a manifest entry's `use` names. Configure is
// called once per manifest entry with the entry's name and config block and
// returns the handler served under that name.
type Configurable interface {
	Handler
	Configure(id string, config map[string]any) (Handler, error)
}
