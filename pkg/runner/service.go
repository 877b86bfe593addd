package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
)

// service implements realmv1.RunnerServiceServer over a fixed set of
// handlers and adapters. It reports each outcome as it happened; what the
// outcome means for the step and the run is the engine's decision.
type service struct {
	realmv1.UnimplementedRunnerServiceServer
	handlers map[string]handler.Handler
	adapters map[string]Adapter
	log      *slog.Logger
}

// outcome is what one handler or adapter call produced.
type outcome struct {
	result handler.Result
	data   any
	err    error
}

// ExecuteHandler runs one attempt of an auto step. The engine sets the
// deadline from timeout_seconds; when ctx ends first the call returns the
// context's status and the handler's late result is dropped (like Realm, the
// runner does not kill the handler's code: it is told through ctx).
func (s *service) ExecuteHandler(ctx context.Context, req *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
	h, ok := s.handlers[req.GetHandler()]
	if !ok {
		return nil, errcode.ToStatus(errcode.Newf(errcode.EngineHandlerNotRegistered,
			"handler '%s' is not registered in this runner", req.GetHandler())).Err()
	}
	params, _ := asMap(req.GetInputs())["params"].(map[string]any)
	if params == nil {
		params = map[string]any{}
	}
	in := handler.Inputs{Params: params}
	sc := handler.StepContext{
		RunID:     req.GetRunId(),
		Step:      req.GetStep(),
		RunParams: asMap(req.GetRunParams()),
		Config:    asMap(req.GetConfig()),
		Resources: asMap(req.GetResources()),
		Attempt:   int(req.GetAttempt()),
	}
	o, err := s.call(ctx, "handler", req.GetHandler(), func() (outcome, error) {
		r, err := h.Execute(ctx, in, sc)
		return outcome{result: r}, err
	})
	if err != nil {
		return nil, err
	}
	return handlerResponse(o), nil
}

// CallAdapter runs one adapter call of an auto step with uses_service.
func (s *service) CallAdapter(ctx context.Context, req *realmv1.CallAdapterRequest) (*realmv1.CallAdapterResponse, error) {
	a, ok := s.adapters[req.GetAdapter()]
	if !ok {
		return nil, errcode.ToStatus(errcode.Newf(errcode.EngineAdapterNotRegistered,
			"adapter '%s' is not registered in this runner", req.GetAdapter())).Err()
	}
	call := AdapterCall{
		Method:    req.GetMethod(),
		Operation: req.GetOperation(),
		Params:    asMap(req.GetParams()),
		Config:    asMap(req.GetConfig()),
		RunID:     req.GetRunId(),
		Step:      req.GetStep(),
	}
	o, err := s.call(ctx, "adapter", req.GetAdapter(), func() (outcome, error) {
		data, err := a.Call(ctx, call)
		return outcome{data: data}, err
	})
	if err != nil {
		return nil, err
	}
	if o.err != nil {
		return &realmv1.CallAdapterResponse{Error: handlerError(o.err)}, nil
	}
	v, err := toValue(o.data)
	if err != nil {
		return &realmv1.CallAdapterResponse{Error: &realmv1.HandlerError{Message: err.Error()}}, nil
	}
	return &realmv1.CallAdapterResponse{Data: v}, nil
}

// call runs fn in its own goroutine, so that a panic is recovered where it
// happens and a handler that ignores ctx cannot hold the RPC past its
// deadline. It returns a gRPC status error only when ctx ended first.
func (s *service) call(ctx context.Context, kind, name string, fn func() (outcome, error)) (outcome, error) {
	done := make(chan outcome, 1) // buffered: a late result must not block the goroutine
	go func() {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("runner: "+kind+" panicked", kind, name, "panic", p, "stack", string(debug.Stack()))
				done <- outcome{err: fmt.Errorf("%s '%s' panicked: %v", kind, name, p)}
			}
		}()
		o, err := fn()
		o.err = err
		done <- o
	}()
	select {
	case o := <-done:
		return o, nil
	case <-ctx.Done():
		return outcome{}, status.FromContextError(ctx.Err()).Err()
	}
}

// handlerResponse maps a handler's outcome to the reply, per the contract:
// data → data; no data (Empty(), the zero Result) → data {}; a warning →
// warn (with data); an abort → abort_message (data, if any, is sent and the
// engine drops it); an error → error. Data is never left unset: to the
// engine that means "returned nothing", which fails the step, and a Go
// handler that returned no error has succeeded.
func handlerResponse(o outcome) *realmv1.ExecuteHandlerResponse {
	if o.err != nil {
		return &realmv1.ExecuteHandlerResponse{Error: handlerError(o.err)}
	}
	r := o.result
	resp := &realmv1.ExecuteHandlerResponse{}
	data := r.Data
	if data == nil {
		data = map[string]any{}
	}
	v, err := toValue(data)
	if err != nil {
		return &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: err.Error()}}
	}
	resp.Data = v
	if r.Warn != "" {
		resp.Warn = &r.Warn
	}
	if r.Abort != nil {
		msg := r.Abort.Message
		resp.AbortMessage = &msg
	}
	return resp
}

// handlerError reports err: a *WorkflowError anywhere in its chain with its
// code, category, agent_action, retryable flag and details; any other error
// by its message alone (no code).
func handlerError(err error) *realmv1.HandlerError {
	var werr *handler.WorkflowError
	if !errors.As(err, &werr) {
		return &realmv1.HandlerError{Message: err.Error()}
	}
	var details *structpb.Struct
	if len(werr.Details) > 0 {
		details = toStruct(werr.Details)
	}
	return &realmv1.HandlerError{
		Message:     werr.Error(),
		Code:        string(werr.Code),
		Category:    string(werr.Category),
		AgentAction: string(werr.AgentAction),
		Retryable:   werr.Retryable,
		Details:     details,
	}
}
