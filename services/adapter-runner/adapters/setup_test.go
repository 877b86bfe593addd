package adapters_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
	"github.com/realm-go/realm/services/adapter-runner/ratelimit"
)

// waitLimit only keeps a broken test from hanging; it is never asserted on.
const waitLimit = 10 * time.Second

// fakeRegistry is a RegistryService that hands each registration to the
// test.
type fakeRegistry struct {
	realmv1.UnimplementedRegistryServiceServer
	registered chan *realmv1.RegisterRequest
}

func (f *fakeRegistry) Register(_ context.Context, req *realmv1.RegisterRequest) (*realmv1.RegisterResponse, error) {
	select {
	case f.registered <- req:
	default:
	}
	return &realmv1.RegisterResponse{RunnerId: "runner-1", LeaseExpiresAt: timestamppb.Now()}, nil
}

func (f *fakeRegistry) Renew(context.Context, *realmv1.RenewRequest) (*realmv1.RenewResponse, error) {
	return &realmv1.RenewResponse{LeaseExpiresAt: timestamppb.Now()}, nil
}

func (f *fakeRegistry) Deregister(context.Context, *realmv1.DeregisterRequest) (*realmv1.DeregisterResponse, error) {
	return &realmv1.DeregisterResponse{}, nil
}

// served is a running adapter runner, reached as the engine would.
type served struct {
	client   realmv1.RunnerServiceClient
	register *realmv1.RegisterRequest
}

// serve runs runner.Serve with the given adapters against a fake registry,
// waits for its registration and dials the endpoint it gave.
func serve(t *testing.T, adps map[string]runner.Adapter) *served {
	t.Helper()
	reg := &fakeRegistry{registered: make(chan *realmv1.RegisterRequest, 10)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	realmv1.RegisterRegistryServiceServer(srv, reg)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Serve(ctx, runner.Options{
			Name: "adapter-runner", EngineAddr: lis.Addr().String(), Adapters: adps,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryBackoff: time.Millisecond,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })

	var req *realmv1.RegisterRequest
	select {
	case req = <-reg.registered:
	case <-time.After(waitLimit):
		t.Fatal("the runner did not register")
	}
	conn, err := grpc.NewClient(req.GetEndpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &served{client: realmv1.NewRunnerServiceClient(conn), register: req}
}

// fakeClock moves only when a caller sleeps, and records every sleep.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func (c *fakeClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

// env is a fake environment.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// loopbackAllowed are Options that let the http adapter reach the test's
// services, which listen on loopback (refused by default).
func loopbackAllowed() adapters.Options {
	return adapters.Options{AllowHosts: []string{"127.0.0.1"}}
}

// httpRunner serves the catalog's http adapter with a fake clock and
// environment, and returns the client and the clock. It may reach the
// test's services on loopback, and sends each of vars to them.
func httpRunner(t *testing.T, vars map[string]string) (*served, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	opts := loopbackAllowed()
	opts.Limiters, opts.LookupEnv, opts.SecretHosts = ratelimit.New(clock), env(vars), map[string][]string{}
	for k := range vars {
		opts.SecretHosts[k] = []string{"127.0.0.1"}
	}
	adps, err := adapters.Catalog(opts, "")
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, adps), clock
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// call sends one CallAdapter for the http adapter.
func call(t *testing.T, s *served, method, op string, params, config map[string]any) *realmv1.CallAdapterResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	resp, err := s.client.CallAdapter(ctx, &realmv1.CallAdapterRequest{
		Adapter: "http", Method: method, Operation: op,
		Params: mustStruct(t, params), Config: mustStruct(t, config), RunId: "run-1", Step: "step",
	})
	if err != nil {
		t.Fatalf("CallAdapter: %v", err)
	}
	return resp
}

// TestEveryExampleIsServedThroughTheRunner: each catalog adapter, built
// from its manifest entry on its service's stub, answers its example
// through the runner's gRPC service as the engine calls it.
func TestEveryExampleIsServedThroughTheRunner(t *testing.T) {
	t.Parallel()
	examples := []apistub.Example{
		apistub.GitHubExample(apistub.NewGitHub(t)),
		apistub.SlackExample(apistub.NewSlack(t)),
		apistub.AirtableExample(apistub.NewAirtable(t)),
		apistub.NotionExample(apistub.NewNotion(t)),
		apistub.GorgiasExample(apistub.NewGorgias(t)),
		apistub.ShopifyExample(apistub.NewShopify(t)),
		apistub.ParcelPanelExample(apistub.NewParcelPanel(t)),
		apistub.MockExample(),
	}
	built := map[string]runner.Adapter{}
	for _, ex := range examples {
		built[ex.Adapter], _ = mustBuild(t, ex)
	}
	s := serve(t, built)
	for _, ex := range examples {
		t.Run(ex.Adapter, func(t *testing.T) {
			resp := callNamed(t, s, ex.Adapter, ex.Method, ex.Operation, ex.Params)
			if e := resp.GetError(); e != nil {
				t.Fatalf("%s: %s", e.GetCode(), e.GetMessage())
			}
			if got, want := asJSON(t, resp.GetData().AsInterface().(map[string]any)["data"]), asJSON(t, ex.Output); got != want {
				t.Errorf("data = %s\nwant %s", got, want)
			}
		})
	}
}
