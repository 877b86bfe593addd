package server_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/server"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/pkg/tracing"
)

// recordSpans installs a real SDK tracer provider that keeps every ended
// span, and the propagators tracing.Setup installs, as the process
// globals until the test ends. Tests using it must not run in parallel.
func recordSpans(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(tracing.Propagator())
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		_ = tp.Shutdown(context.Background())
	})
	return rec, tp
}

// span waits for the ended span of that name and kind.
func span(t *testing.T, rec *tracetest.SpanRecorder, name string, kind trace.SpanKind) sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, s := range rec.Ended() {
			if s.Name() == name && s.SpanKind() == kind {
				return s
			}
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range rec.Ended() {
				names = append(names, s.Name()+"/"+s.SpanKind().String())
			}
			t.Fatalf("no %s span %q; ended: %v", kind, name, names)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A call that runs a handler is one trace across the three processes'
// hops: caller → engine-svc (server span) → runner call (client span) →
// pkg/runner (server span) → the handler's ctx, each the child of the one
// before, all with the same trace id.
func TestOneTraceFollowsACallThroughTheEngineToTheRunner(t *testing.T) {
	rec, tp := recordSpans(t)

	// The engine as engine-svc's main serves it: real gRPC on a loopback
	// socket, with the tracing server options.
	m := miniredis.RunT(t)
	rc := redis.NewClient(&redis.Options{Addr: m.Addr()})
	st := store.NewRedis(rc, store.Options{Prefix: "realm", Buckets: 16})
	t.Cleanup(func() { st.Close() })
	reg := registry.New(rc, "realm", nil, time.Millisecond)
	eng := engine.New(engine.Options{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	gs := grpc.NewServer(tracing.ServerOptions()...)
	realmv1.RegisterEngineServiceServer(gs, server.New(eng))
	realmv1.RegisterRegistryServiceServer(gs, server.NewRegistry(reg, eng.CheckUsesResources))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { eng.Close(); gs.Stop() })

	// A real runner, served by the SDK with its default options.
	seen := make(chan trace.SpanContext, 1)
	rctx, stopRunner := context.WithCancel(context.Background())
	runnerDone := make(chan error, 1)
	go func() {
		runnerDone <- runner.Serve(rctx, runner.Options{
			Name: "traced-runner", Listen: "127.0.0.1:0", EngineAddr: lis.Addr().String(),
			Logger: slog.New(slog.DiscardHandler),
		}, runner.Registration{Name: "traced", Handler: handler.Func(func(ctx context.Context, _ handler.Inputs, _ handler.StepContext) (handler.Result, error) {
			seen <- trace.SpanContextFromContext(ctx)
			return handler.Data(map[string]any{"ok": true}), nil
		})})
	}()
	t.Cleanup(func() { stopRunner(); <-runnerDone })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ok, _ := reg.Has(ctx(t), "traced", false); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the runner did not register")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The caller: a client connection with the tracing dial options.
	conn, err := grpc.NewClient(lis.Addr().String(), append(tracing.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := realmv1.NewEngineServiceClient(conn)
	wf := []byte("id: traced_wf\nname: Traced\nversion: 1\nsteps:\n  work:\n    description: Do the work.\n    execution: auto\n    handler: traced\n")
	if r, err := client.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: wf, Path: "workflow.yaml"}}); err != nil || !r.GetRegistered() {
		t.Fatalf("register: %v %v", err, r.GetReport().GetText())
	}
	cctx, root := tp.Tracer("test").Start(ctx(t), "caller")
	resp, err := client.StartRun(cctx, &realmv1.StartRunRequest{WorkflowId: "traced_wf"})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.GetReply().GetRunPhase(); p != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("run phase %v, reply %v", p, resp.GetReply())
	}

	tid := root.SpanContext().TraceID()
	chain := []sdktrace.ReadOnlySpan{
		span(t, rec, "realm.v1.EngineService/StartRun", trace.SpanKindClient),
		span(t, rec, "realm.v1.EngineService/StartRun", trace.SpanKindServer),
		span(t, rec, "realm.v1.RunnerService/ExecuteHandler", trace.SpanKindClient),
		span(t, rec, "realm.v1.RunnerService/ExecuteHandler", trace.SpanKindServer),
	}
	parent := root.SpanContext()
	for _, s := range chain {
		if s.SpanContext().TraceID() != tid {
			t.Errorf("%s %s: trace id %s, want the caller's %s", s.SpanKind(), s.Name(), s.SpanContext().TraceID(), tid)
		}
		if s.Parent().SpanID() != parent.SpanID() {
			t.Errorf("%s %s: parent %s, want %s", s.SpanKind(), s.Name(), s.Parent().SpanID(), parent.SpanID())
		}
		parent = s.SpanContext()
	}
	// The server spans continue a remote parent: the context crossed a
	// socket in the call's metadata.
	if !chain[1].Parent().IsRemote() || !chain[3].Parent().IsRemote() {
		t.Error("server spans' parents are not remote")
	}
	select {
	case sc := <-seen:
		if sc.TraceID() != tid || sc.SpanID() != chain[3].SpanContext().SpanID() {
			t.Errorf("the handler's ctx carries span %s/%s, want %s/%s", sc.TraceID(), sc.SpanID(), tid, chain[3].SpanContext().SpanID())
		}
	default:
		t.Error("the handler did not run")
	}
}
