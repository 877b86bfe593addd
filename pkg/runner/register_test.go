package runner_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

var ok = handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
	return handler.Empty(), nil
})

func TestRunnerRegistersRenewsAndDeregistersOnShutdown(t *testing.T) {
	t.Parallel()
	f := &fakeRegistry{}
	s := setup(t, f, runner.Options{Name: "shop", Lease: 300 * time.Millisecond},
		runner.Registration{Name: "order_total", Handler: ok},
		runner.Registration{Name: "needs", Handler: ok, UsesResources: []string{"fetch", "parse"}},
	)

	req := s.register.register
	want := &realmv1.RegisterRequest{
		Endpoint:   req.GetEndpoint(),
		RunnerName: "shop",
		Handlers: []*realmv1.HandlerSpec{
			{Name: "order_total"},
			{Name: "needs", UsesResources: []string{"fetch", "parse"}},
		},
		Adapters: []string{},
		Lease:    req.GetLease(),
	}
	if !proto.Equal(req, want) {
		t.Errorf("Register request:\n got %v\nwant %v", req, want)
	}
	if got := req.GetLease().AsDuration(); got != 300*time.Millisecond {
		t.Errorf("lease %v, want 300ms", got)
	}
	if !strings.HasPrefix(req.GetEndpoint(), "127.0.0.1:") {
		t.Errorf("endpoint %q is not the loopback listener", req.GetEndpoint())
	}
	// The endpoint it sent is the one that answers.
	if _, err := s.client.ExecuteHandler(context.Background(), &realmv1.ExecuteHandlerRequest{Handler: "order_total"}); err != nil {
		t.Fatalf("calling the registered endpoint: %v", err)
	}

	for range 2 {
		if c := f.nextOf(t, "Renew"); c.runnerID != s.register.runnerID {
			t.Fatalf("renewed %q, want %q", c.runnerID, s.register.runnerID)
		}
	}

	if err := s.stop(t); err != nil {
		t.Fatalf("Serve returned %v after a clean shutdown", err)
	}
	calls := f.recorded()
	last := calls[len(calls)-1]
	if last.method != "Deregister" || last.runnerID != s.register.runnerID {
		t.Errorf("last registry call %+v, want Deregister of %q", last, s.register.runnerID)
	}
	// Stopped: the endpoint no longer answers.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := s.client.ExecuteHandler(ctx, &realmv1.ExecuteHandlerRequest{Handler: "order_total"}); err == nil {
		t.Error("the runner still answers after Serve returned")
	}
}

func TestRunnerRetriesAFailedRegistration(t *testing.T) {
	t.Parallel()
	f := &fakeRegistry{failRegister: 3}
	s := setup(t, f, runner.Options{Lease: 300 * time.Millisecond}, runner.Registration{Name: "h", Handler: ok})

	var registers []registryCall
	for _, c := range f.recorded() {
		if c.method == "Register" {
			registers = append(registers, c)
		}
	}
	if len(registers) != 4 || registers[3].runnerID == "" {
		t.Fatalf("Register calls %+v, want 3 failures then a success", registers)
	}
	// Once registered it renews the id it got.
	if c := f.nextOf(t, "Renew"); c.runnerID != s.register.runnerID {
		t.Errorf("renewed %q, want %q", c.runnerID, s.register.runnerID)
	}
}

func TestRunnerRetriesRegistrationUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	f := &fakeRegistry{failRegister: -1}
	addr := startRegistry(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runner.Serve(ctx, runner.Options{EngineAddr: addr, Logger: quietLogger(), RetryBackoff: time.Millisecond, MaxRetryBackoff: 4 * time.Millisecond},
			runner.Registration{Name: "h", Handler: ok})
	}()
	for range 5 {
		f.nextOf(t, "Register")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v, want nil", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Serve kept retrying after its context ended")
	}
	for _, c := range f.recorded() {
		if c.method != "Register" {
			t.Errorf("unexpected %s call by a runner that never registered", c.method)
		}
	}
}

func TestRunnerRegistersAgainWhenTheEngineForgetsIt(t *testing.T) {
	t.Parallel()
	f := &fakeRegistry{renewNotFound: 1}
	s := setup(t, f, runner.Options{Lease: 300 * time.Millisecond}, runner.Registration{Name: "h", Handler: ok})

	if c := f.nextOf(t, "Renew"); c.runnerID != "runner-1" {
		t.Fatalf("first renew of %q", c.runnerID)
	}
	again := f.nextOf(t, "Register")
	if again.runnerID != "runner-2" {
		t.Fatalf("registered again as %q, want runner-2", again.runnerID)
	}
	if c := f.nextOf(t, "Renew"); c.runnerID != "runner-2" {
		t.Errorf("renewed %q after registering again, want runner-2", c.runnerID)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if c := f.nextOf(t, "Deregister"); c.runnerID != "runner-2" {
		t.Errorf("deregistered %q, want runner-2", c.runnerID)
	}
}

func TestServeCutsOffStepsStillRunningAtTheShutdownDeadline(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	s := setup(t, &fakeRegistry{}, runner.Options{ShutdownTimeout: 100 * time.Millisecond},
		runner.Registration{Name: "stubborn", Handler: handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
			close(started)
			<-release // ignores its context
			return handler.Empty(), nil
		})})

	callErr := make(chan error, 1)
	go func() {
		_, err := s.client.ExecuteHandler(context.Background(), &realmv1.ExecuteHandlerRequest{Handler: "stubborn"})
		callErr <- err
	}()
	<-started
	if err := s.stop(t); err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	select {
	case err := <-callErr:
		if code := status.Code(err); code != codes.Canceled && code != codes.Unavailable {
			t.Errorf("the cut-off call ended with %v, want Canceled or Unavailable", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the running call was not ended at shutdown")
	}
}

func TestServeRefusesBadRegistrationsBeforeServing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		regs      []runner.Registration
		want      string
		duplicate bool
	}{
		{"a name in code and in the manifest",
			[]runner.Registration{
				{Name: "order_total", Handler: ok, Source: "../reg.mjs"},
				{Name: "order_total", Handler: ok, Manifest: "/srv/shop/realm.yaml"},
			},
			"Extension handler 'order_total' is declared by both '../reg.mjs' and the deployment manifest '/srv/shop/realm.yaml' — manifest entries and code-module exports share one namespace; names must be unique.", true},
		{"the manifest first, code second",
			[]runner.Registration{
				{Name: "order_total", Handler: ok, Manifest: "/srv/shop/realm.yaml"},
				{Name: "order_total", Handler: ok},
			},
			"Extension handler 'order_total' is declared by both 'shop-runner' and the deployment manifest '/srv/shop/realm.yaml' — manifest entries and code-module exports share one namespace; names must be unique.", true},
		{"a name twice in code",
			[]runner.Registration{
				{Name: "x", Handler: ok, Source: "a.go"},
				{Name: "x", Handler: ok, Source: "b.go"},
			},
			"Extension handler 'x' is declared by both 'a.go' and 'b.go' — extension names must be unique across declared modules.", true},
		{"a registration with no name", []runner.Registration{{Handler: ok}}, "runner: a handler registration has no name", false},
		{"a registration with no handler", []runner.Registration{{Name: "x"}}, "runner: handler 'x' has no implementation", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeRegistry{}
			addr := startRegistry(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			err := runner.Serve(ctx, runner.Options{Name: "shop-runner", EngineAddr: addr, Logger: quietLogger()}, tt.regs...)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Serve error:\n got %v\nwant %s", err, tt.want)
			}
			if got := errors.Is(err, runner.ErrDuplicateHandler); got != tt.duplicate {
				t.Errorf("errors.Is(err, ErrDuplicateHandler) = %v, want %v", got, tt.duplicate)
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				t.Error("Serve ran until its context ended instead of refusing at once")
			}
			if calls := f.recorded(); len(calls) != 0 {
				t.Errorf("a refused runner called the registry: %+v", calls)
			}
		})
	}
}

func TestServeReportsAListenFailure(t *testing.T) {
	t.Parallel()
	// A loopback port already taken (off loopback, plaintext is refused
	// before any listen).
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	err = runner.Serve(context.Background(), runner.Options{Listen: addr, Logger: quietLogger()},
		runner.Registration{Name: "h", Handler: ok})
	if err == nil || !strings.HasPrefix(err.Error(), "runner: listen on "+addr+": ") {
		t.Errorf("Serve error %v", err)
	}
}

// schemaAdapter declares a config_schema (spec §13.1).
type schemaAdapter struct{ echoAdapter }

func (schemaAdapter) ConfigSchema() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false,
		"properties": map[string]any{"base_url": map[string]any{"type": "string"}}}
}

func TestRegistrationCarriesEachAdaptersConfigSchema(t *testing.T) {
	t.Parallel()
	s := setup(t, &fakeRegistry{}, runner.Options{Name: "adapters", Adapters: map[string]runner.Adapter{
		"http": schemaAdapter{}, "filesystem": echoAdapter{},
	}})
	req := s.register.register
	if got := strings.Join(req.GetAdapters(), ","); got != "filesystem,http" {
		t.Errorf("adapters = %s, want both names for engines that read only names", got)
	}
	want := []*realmv1.AdapterSpec{
		{Name: "filesystem"}, // declares none: its steps may not carry config
		{Name: "http", ConfigSchemaJson: `{"additionalProperties":false,"properties":{"base_url":{"type":"string"}},"type":"object"}`},
	}
	if len(req.GetAdapterSpecs()) != len(want) {
		t.Fatalf("adapter_specs = %v, want %v", req.GetAdapterSpecs(), want)
	}
	for i, w := range want {
		if !proto.Equal(req.GetAdapterSpecs()[i], w) {
			t.Errorf("adapter_specs[%d] = %v, want %v", i, req.GetAdapterSpecs()[i], w)
		}
	}
}
