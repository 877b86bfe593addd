package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// returns is a handler that returns r and err.
func returns(r handler.Result, err error) handler.Handler {
	return handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
		return r, err
	})
}

// echo returns everything it received.
var echo = handler.Func(func(_ context.Context, in handler.Inputs, sc handler.StepContext) (handler.Result, error) {
	return handler.Data(map[string]any{
		"params": in.Params, "run_id": sc.RunID, "step": sc.Step, "run_params": sc.RunParams,
		"config": sc.Config, "resources": sc.Resources, "attempt": sc.Attempt,
	}), nil
})

func mustStruct(t *testing.T, js string) *structpb.Struct {
	t.Helper()
	s := &structpb.Struct{}
	if err := protojson.Unmarshal([]byte(js), s); err != nil {
		t.Fatalf("bad struct %s: %v", js, err)
	}
	return s
}

func mustValue(t *testing.T, js string) *structpb.Value {
	t.Helper()
	v := &structpb.Value{}
	if err := protojson.Unmarshal([]byte(js), v); err != nil {
		t.Fatalf("bad value %s: %v", js, err)
	}
	return v
}

func ptr(s string) *string { return &s }

func TestExecuteHandlerReportsEachOutcomeFaithfully(t *testing.T) {
	t.Parallel()
	notInSystem := &handler.WorkflowError{
		Message: "Order A-17 is not in the system.", Code: "RESOURCE_NOT_FOUND",
		Category: errcode.CategoryResource, AgentAction: errcode.ActionReportToUser,
		Retryable: false, Details: map[string]any{"order": "A-17"},
	}
	rateLimited := handler.NewWorkflowError(errcode.ServiceRateLimited, "rate limited")
	regs := []runner.Registration{
		{Name: "data", Handler: returns(handler.Data(map[string]any{"checked": 3}), nil)},
		{Name: "empty", Handler: returns(handler.Empty(), nil)},
		{Name: "list", Handler: returns(handler.Data([]any{1, 2}), nil)},
		{Name: "struct", Handler: returns(handler.Data(struct {
			Total float64 `json:"total"`
		}{50}), nil)},
		{Name: "warn", Handler: returns(handler.Warn(map[string]any{"checked": 3}, "One record had no email address."), nil)},
		{Name: "warn_only", Handler: returns(handler.Result{Warn: "w"}, nil)},
		{Name: "abort", Handler: returns(handler.AbortRun("The account is closed."), nil)},
		{Name: "abort_data", Handler: returns(handler.Result{Data: map[string]any{"x": 1}, Abort: &handler.Abort{Message: "stop"}}, nil)},
		{Name: "nothing", Handler: returns(handler.Result{}, nil)},
		{Name: "not_json", Handler: returns(handler.Data(make(chan int)), nil)},
		{Name: "throws", Handler: returns(handler.Result{}, errors.New("the billing service is down"))},
		{Name: "not_found", Handler: returns(handler.Data(map[string]any{"ignored": true}), notInSystem)},
		{Name: "flaky", Handler: returns(handler.Result{}, fmt.Errorf("calling the API: %w", rateLimited))},
		{Name: "boom", Handler: handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
			panic("kaboom")
		})},
		{Name: "nil_map", Handler: handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
			var m map[string]int
			//lint:ignore SA5000 the nil map is the point: a runtime panic, not a call to panic
			m["x"]++
			return handler.Result{}, nil
		})},
		{Name: "show", Handler: echo},
	}
	s := setup(t, &fakeRegistry{}, runner.Options{}, regs...)

	tests := []struct {
		name string
		req  *realmv1.ExecuteHandlerRequest
		want *realmv1.ExecuteHandlerResponse
		// wantErrPrefix checks a HandlerError's message by prefix (Go's
		// own texts), leaving the rest of want to compare.
		wantErrPrefix string
	}{
		{name: "data is the output", req: &realmv1.ExecuteHandlerRequest{Handler: "data"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{"checked":3}`)}},
		{name: "an empty result is the output {}", req: &realmv1.ExecuteHandlerRequest{Handler: "empty"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{}`)}},
		{name: "data need not be an object", req: &realmv1.ExecuteHandlerRequest{Handler: "list"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `[1,2]`)}},
		{name: "data may be a struct with json tags", req: &realmv1.ExecuteHandlerRequest{Handler: "struct"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{"total":50}`)}},
		{name: "a warning travels with the data", req: &realmv1.ExecuteHandlerRequest{Handler: "warn"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{"checked":3}`), Warn: ptr("One record had no email address.")}},
		{name: "a warning without data records {}", req: &realmv1.ExecuteHandlerRequest{Handler: "warn_only"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{}`), Warn: ptr("w")}},
		{name: "an abort carries its message", req: &realmv1.ExecuteHandlerRequest{Handler: "abort"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{}`), AbortMessage: ptr("The account is closed.")}},
		{name: "an abort with data sends both for the engine to drop the data", req: &realmv1.ExecuteHandlerRequest{Handler: "abort_data"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{"x":1}`), AbortMessage: ptr("stop")}},
		{name: "the zero Result completes with the output {}", req: &realmv1.ExecuteHandlerRequest{Handler: "nothing"},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{}`)}},
		{name: "data that is not JSON is a plain error", req: &realmv1.ExecuteHandlerRequest{Handler: "not_json"},
			want:          &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{}},
			wantErrPrefix: "the data is not a JSON value: "},
		{name: "a plain error is its message with no code", req: &realmv1.ExecuteHandlerRequest{Handler: "throws"},
			want: &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "the billing service is down"}}},
		{name: "a WorkflowError keeps code, category, action, retryable and details; data is not sent",
			req: &realmv1.ExecuteHandlerRequest{Handler: "not_found"},
			want: &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{
				Message: "Order A-17 is not in the system.", Code: "RESOURCE_NOT_FOUND", Category: "RESOURCE",
				AgentAction: "report_to_user", Retryable: false, Details: mustStruct(t, `{"order":"A-17"}`),
			}}},
		{name: "a wrapped retryable WorkflowError is found and sent with its own message",
			req: &realmv1.ExecuteHandlerRequest{Handler: "flaky"},
			want: &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{
				Message: "rate limited", Code: "SERVICE_RATE_LIMITED", Category: "SERVICE",
				AgentAction: "wait_and_proceed", Retryable: true,
			}}},
		{name: "a panic is a plain error", req: &realmv1.ExecuteHandlerRequest{Handler: "boom"},
			want: &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "handler 'boom' panicked: kaboom"}}},
		{name: "a runtime panic is a plain error", req: &realmv1.ExecuteHandlerRequest{Handler: "nil_map"},
			want:          &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{}},
			wantErrPrefix: "handler 'nil_map' panicked: assignment to entry in nil map"},
		{name: "the handler receives input and context as the engine sent them",
			req: &realmv1.ExecuteHandlerRequest{
				Handler: "show", RunId: "031047f7-ea22-4247-ae2b-36370d4eb9ad", Step: "price", Attempt: 2,
				Inputs:    mustStruct(t, `{"params":{"order":"A-17"}}`),
				RunParams: mustStruct(t, `{"order":"A-17"}`),
				Config:    mustStruct(t, `{"currency":"EUR","rate":1.19}`),
				Resources: mustStruct(t, `{"fetch":{},"$settlement":{"fetch":{"settled_by_default":false,"validation_rejections":0,"failed":false}}}`),
			},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{
				"params":{"order":"A-17"}, "run_id":"031047f7-ea22-4247-ae2b-36370d4eb9ad", "step":"price", "attempt":2,
				"run_params":{"order":"A-17"}, "config":{"currency":"EUR","rate":1.19},
				"resources":{"fetch":{},"$settlement":{"fetch":{"settled_by_default":false,"validation_rejections":0,"failed":false}}}}`)}},
		{name: "missing input and context read as empty objects",
			req: &realmv1.ExecuteHandlerRequest{Handler: "show", RunId: "r", Step: "only", Attempt: 1},
			want: &realmv1.ExecuteHandlerResponse{Data: mustValue(t, `{
				"params":{}, "run_id":"r", "step":"only", "attempt":1, "run_params":{}, "config":{}, "resources":{}}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.client.ExecuteHandler(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("ExecuteHandler: %v", err)
			}
			if tt.wantErrPrefix != "" {
				msg := got.GetError().GetMessage()
				if !strings.HasPrefix(msg, tt.wantErrPrefix) {
					t.Errorf("error message %q does not start with %q", msg, tt.wantErrPrefix)
				}
				got.GetError().Message = ""
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("response:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestExecuteHandlerKeepsServingAfterAPanic(t *testing.T) {
	t.Parallel()
	s := setup(t, &fakeRegistry{}, runner.Options{},
		runner.Registration{Name: "boom", Handler: handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
			panic(errors.New("kaboom"))
		})},
		runner.Registration{Name: "ok", Handler: returns(handler.Empty(), nil)},
	)
	for range 3 {
		resp, err := s.client.ExecuteHandler(context.Background(), &realmv1.ExecuteHandlerRequest{Handler: "boom"})
		if err != nil || resp.GetError().GetMessage() != "handler 'boom' panicked: kaboom" {
			t.Fatalf("boom: %v, %v", resp, err)
		}
	}
	resp, err := s.client.ExecuteHandler(context.Background(), &realmv1.ExecuteHandlerRequest{Handler: "ok"})
	if err != nil || !proto.Equal(resp.GetData(), mustValue(t, `{}`)) {
		t.Fatalf("after panics: %v, %v", resp, err)
	}
}

func TestExecuteHandlerRefusesAnUnknownHandlerAsNotRegistered(t *testing.T) {
	t.Parallel()
	s := setup(t, &fakeRegistry{}, runner.Options{}, runner.Registration{Name: "ok", Handler: returns(handler.Empty(), nil)})
	_, err := s.client.ExecuteHandler(context.Background(), &realmv1.ExecuteHandlerRequest{Handler: "missing"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("status %v, want FailedPrecondition", err)
	}
	e, ok := errcode.FromStatus(err)
	if !ok || e.Code != errcode.EngineHandlerNotRegistered || e.Message != "handler 'missing' is not registered in this runner" {
		t.Errorf("error detail = %+v, %v", e, ok)
	}
}

// serverReturns records each ExecuteHandler's server-side status code.
type serverReturns struct {
	codes chan codes.Code
}

func (r *serverReturns) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if strings.HasSuffix(info.FullMethod, "/ExecuteHandler") {
		r.codes <- status.Code(err)
	}
	return resp, err
}

func TestExecuteHandlerHonoursTheDeadline(t *testing.T) {
	t.Parallel()
	sawDone := make(chan error, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	rec := &serverReturns{codes: make(chan codes.Code, 10)}
	s := setup(t, &fakeRegistry{}, runner.Options{ServerOptions: []grpc.ServerOption{grpc.UnaryInterceptor(rec.interceptor)}},
		runner.Registration{Name: "listens", Handler: handler.Func(func(ctx context.Context, _ handler.Inputs, _ handler.StepContext) (handler.Result, error) {
			<-ctx.Done()
			sawDone <- ctx.Err()
			return handler.Result{}, ctx.Err()
		})},
		runner.Registration{Name: "stubborn", Handler: handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
			<-release // ignores its context
			return handler.Empty(), nil
		})},
	)

	tests := []struct {
		name    string
		handler string
	}{
		{"a handler that watches ctx sees the deadline", "listens"},
		{"a handler that ignores ctx does not hold the call", "stubborn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := s.client.ExecuteHandler(ctx, &realmv1.ExecuteHandlerRequest{Handler: tt.handler})
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("client status %v, want DeadlineExceeded", err)
			}
			select {
			case c := <-rec.codes:
				// The server's own deadline and the client's cancellation
				// race; either way the call ended with its context.
				if c != codes.DeadlineExceeded && c != codes.Canceled {
					t.Errorf("server returned %v, want DeadlineExceeded or Canceled", c)
				}
			case <-time.After(waitLimit):
				t.Fatal("the runner did not end the call after its deadline")
			}
		})
	}
	select {
	case err := <-sawDone:
		if err == nil {
			t.Error("the handler's context ended without an error")
		}
	case <-time.After(waitLimit):
		t.Fatal("the handler's context was not cancelled")
	}
}

type echoAdapter struct{}

func (echoAdapter) Call(_ context.Context, c runner.AdapterCall) (any, error) {
	if c.Method == "delete" {
		return nil, handler.NewWorkflowError(errcode.AdapterOpUnsupported, "Adapter 'ledger' does not support service_method 'delete'")
	}
	return map[string]any{"status": 200, "data": map[string]any{"method": c.Method, "operation": c.Operation, "params": c.Params, "config": c.Config}}, nil
}

func TestCallAdapterReportsDataAndErrors(t *testing.T) {
	t.Parallel()
	s := setup(t, &fakeRegistry{}, runner.Options{Adapters: map[string]runner.Adapter{"ledger": echoAdapter{}}})

	tests := []struct {
		name string
		req  *realmv1.CallAdapterRequest
		want *realmv1.CallAdapterResponse
	}{
		{"the adapter's response is the data",
			&realmv1.CallAdapterRequest{Adapter: "ledger", Method: "create", Operation: "invoices",
				Params: mustStruct(t, `{"number":7}`), Config: mustStruct(t, `{"adapter":"http"}`)},
			&realmv1.CallAdapterResponse{Data: mustValue(t, `{"status":200,"data":{"method":"create","operation":"invoices","params":{"number":7},"config":{"adapter":"http"}}}`)}},
		{"a WorkflowError keeps its code",
			&realmv1.CallAdapterRequest{Adapter: "ledger", Method: "delete"},
			&realmv1.CallAdapterResponse{Error: &realmv1.HandlerError{
				Message: "Adapter 'ledger' does not support service_method 'delete'", Code: "ADAPTER_OP_UNSUPPORTED",
				Category: "ENGINE", AgentAction: "report_to_user"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.client.CallAdapter(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("response:\n got %v\nwant %v", got, tt.want)
			}
		})
	}

	_, err := s.client.CallAdapter(context.Background(), &realmv1.CallAdapterRequest{Adapter: "nope"})
	if e, ok := errcode.FromStatus(err); !ok || e.Code != errcode.EngineAdapterNotRegistered {
		t.Errorf("unknown adapter: %v", err)
	}
	if got := s.register.register.GetAdapters(); len(got) != 1 || got[0] != "ledger" {
		t.Errorf("registered adapters %v, want [ledger]", got)
	}
}
