package runner_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/runner"
)

// waitLimit bounds every wait for something the test expects to happen; it
// only keeps a broken test from hanging, it is not asserted on.
const waitLimit = 10 * time.Second

// registryCall is one call the fake registry received.
type registryCall struct {
	method   string // Register, Renew, Deregister
	runnerID string
	register *realmv1.RegisterRequest
}

// fakeRegistry is a real RegistryService that records its calls. It fails
// the first failRegister Register calls (all of them when negative) and
// answers NotFound to the first renewNotFound Renew calls.
type fakeRegistry struct {
	realmv1.UnimplementedRegistryServiceServer

	mu            sync.Mutex
	failRegister  int
	renewNotFound int
	registered    int
	calls         []registryCall
	events        chan registryCall
}

func (f *fakeRegistry) record(c registryCall) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	select {
	case f.events <- c:
	default: // the test stopped listening; the call is still recorded
	}
}

func (f *fakeRegistry) Register(_ context.Context, req *realmv1.RegisterRequest) (*realmv1.RegisterResponse, error) {
	f.mu.Lock()
	fail := f.failRegister != 0
	if f.failRegister > 0 {
		f.failRegister--
	}
	id := ""
	if !fail {
		f.registered++
		id = fmt.Sprintf("runner-%d", f.registered)
	}
	f.mu.Unlock()
	f.record(registryCall{method: "Register", runnerID: id, register: req})
	if fail {
		return nil, status.Error(codes.Unavailable, "registry not ready")
	}
	return &realmv1.RegisterResponse{RunnerId: id, LeaseExpiresAt: timestamppb.Now(), Warnings: []string{"a test warning"}}, nil
}

func (f *fakeRegistry) Renew(_ context.Context, req *realmv1.RenewRequest) (*realmv1.RenewResponse, error) {
	f.mu.Lock()
	lost := f.renewNotFound > 0
	if lost {
		f.renewNotFound--
	}
	f.mu.Unlock()
	f.record(registryCall{method: "Renew", runnerID: req.GetRunnerId()})
	if lost {
		return nil, status.Error(codes.NotFound, "no such runner")
	}
	return &realmv1.RenewResponse{LeaseExpiresAt: timestamppb.Now()}, nil
}

func (f *fakeRegistry) Deregister(_ context.Context, req *realmv1.DeregisterRequest) (*realmv1.DeregisterResponse, error) {
	f.record(registryCall{method: "Deregister", runnerID: req.GetRunnerId()})
	return &realmv1.DeregisterResponse{}, nil
}

func (f *fakeRegistry) recorded() []registryCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]registryCall(nil), f.calls...)
}

// next waits for the fake's next call.
func (f *fakeRegistry) next(t *testing.T) registryCall {
	t.Helper()
	select {
	case c := <-f.events:
		return c
	case <-time.After(waitLimit):
		t.Fatalf("no registry call within %s; calls so far: %+v", waitLimit, f.recorded())
		return registryCall{}
	}
}

// nextOf waits for the next call of method, skipping others.
func (f *fakeRegistry) nextOf(t *testing.T, method string) registryCall {
	t.Helper()
	for {
		if c := f.next(t); c.method == method {
			return c
		}
	}
}

// startRegistry serves f on a loopback port and returns its address.
func startRegistry(t *testing.T, f *fakeRegistry) string {
	t.Helper()
	f.events = make(chan registryCall, 1000)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	realmv1.RegisterRegistryServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// started is a running runner.
type started struct {
	registry *fakeRegistry
	// register is the first successful registration.
	register registryCall
	client   realmv1.RunnerServiceClient
	cancel   context.CancelFunc
	// done is closed when Serve has returned err.
	done chan struct{}
	err  error
}

// stop ends the runner and returns Serve's result.
func (s *started) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case <-s.done:
		return s.err
	case <-time.After(waitLimit):
		t.Fatal("Serve did not return after its context ended")
		return nil
	}
}

// quietLogger drops the runner's logs.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// setup starts a fake registry and a runner serving regs, waits for the
// runner's first successful registration and dials the endpoint it gave, as
// the engine would.
func setup(t *testing.T, f *fakeRegistry, opts runner.Options, regs ...runner.Registration) *started {
	t.Helper()
	opts.EngineAddr = startRegistry(t, f)
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	if opts.RetryBackoff == 0 {
		opts.RetryBackoff = time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{registry: f, cancel: cancel, done: make(chan struct{})}
	go func() {
		s.err = runner.Serve(ctx, opts, regs...)
		close(s.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	s.register = f.nextOf(t, "Register")
	for s.register.runnerID == "" { // a failed attempt
		s.register = f.nextOf(t, "Register")
	}
	conn, err := grpc.NewClient(s.register.register.GetEndpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.client = realmv1.NewRunnerServiceClient(conn)
	return s
}
