package tracing_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/tracing"
)

// These tests change the process's global provider and propagator, so
// none of them runs in parallel; each puts the globals back.

func restoreGlobals(t *testing.T) {
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
}

// recording installs, for the test, a provider that records every span
// into the returned recorder, and the propagator Setup installs.
func recording(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	restoreGlobals(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(tracing.Propagator())
	return rec, tp
}

// clearEnv unsets, for the test, every variable that would turn export on.
func clearEnv(t *testing.T) {
	for _, k := range []string{tracing.EnvEndpoint, tracing.EnvTracesEndpoint, tracing.EnvProtocol, tracing.EnvTracesProtocol, tracing.EnvSDKDisabled} {
		t.Setenv(k, "")
	}
}

func TestExportingNeedsAnEndpointAndAnEnabledSDK(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want bool
	}{
		{env: nil, want: false},
		{env: map[string]string{tracing.EnvEndpoint: "http://collector:4318"}, want: true},
		{env: map[string]string{tracing.EnvTracesEndpoint: "http://collector:4318/v1/traces"}, want: true},
		{env: map[string]string{tracing.EnvEndpoint: "http://collector:4318", tracing.EnvSDKDisabled: "true"}, want: false},
		{env: map[string]string{tracing.EnvEndpoint: "http://collector:4318", tracing.EnvSDKDisabled: "TRUE"}, want: false},
		{env: map[string]string{tracing.EnvEndpoint: "http://collector:4318", tracing.EnvSDKDisabled: "false"}, want: true},
	}
	for _, c := range cases {
		clearEnv(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		if got := tracing.Exporting(); got != c.want {
			t.Errorf("Exporting() with %v = %v, want %v", c.env, got, c.want)
		}
	}
}

// Without an endpoint Setup dials nothing and records nothing, but the
// propagator is installed and a caller's trace context passes through.
func TestSetupWithoutEndpointOnlyPropagates(t *testing.T) {
	restoreGlobals(t)
	clearEnv(t)
	began := time.Now()
	shutdown, err := tracing.Setup(context.Background(), "realm-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("Setup and shutdown took %v without an endpoint", d)
	}
	if _, ok := otel.GetTracerProvider().(noop.TracerProvider); !ok {
		t.Errorf("provider is %T, want the no-op provider", otel.GetTracerProvider())
	}
	fields := otel.GetTextMapPropagator().Fields()
	if !slices.Contains(fields, "traceparent") || !slices.Contains(fields, "baggage") {
		t.Errorf("propagator fields %v, want traceparent and baggage", fields)
	}

	// traceparent in → the same context out, through a no-op span.
	in := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), in)
	ctx, span := otel.Tracer("test").Start(ctx, "hop")
	defer span.End()
	if span.IsRecording() {
		t.Error("span is recording without an exporter")
	}
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	if out["traceparent"] != in["traceparent"] {
		t.Errorf("traceparent out %q, want %q", out["traceparent"], in["traceparent"])
	}
}

// collector is an OTLP/HTTP trace receiver that keeps what it is sent.
type collector struct {
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
	errs []error
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	body, err := io.ReadAll(r.Body)
	req := &coltracepb.ExportTraceServiceRequest{}
	if err == nil && r.URL.Path == "/v1/traces" {
		err = proto.Unmarshal(body, req)
	}
	if err != nil {
		c.errs = append(c.errs, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.reqs = append(c.reqs, req)
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func (c *collector) spans() (service []string, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, req := range c.reqs {
		for _, rs := range req.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = append(service, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
		}
	}
	return service, names
}

// With an endpoint, spans go to it over OTLP/HTTP, under the service's
// name, by the time shutdown returns.
func TestSetupWithEndpointExportsOverOTLP(t *testing.T) {
	restoreGlobals(t)
	clearEnv(t)
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	t.Setenv(tracing.EnvEndpoint, srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shutdown, err := tracing.Setup(ctx, "realm-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); !ok {
		t.Fatalf("provider is %T, want the SDK's", otel.GetTracerProvider())
	}
	_, span := otel.Tracer("test").Start(ctx, "work")
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	service, names := col.spans()
	if len(col.errs) > 0 || !slices.Equal(names, []string{"work"}) || !slices.Equal(service, []string{"realm-test"}) {
		t.Errorf("collector got spans %v of services %v (errors %v), want [work] of [realm-test]", names, service, col.errs)
	}
}

// OTEL_SDK_DISABLED=true wins over an endpoint: nothing is exported.
func TestSetupRespectsSDKDisabled(t *testing.T) {
	restoreGlobals(t)
	clearEnv(t)
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	t.Setenv(tracing.EnvEndpoint, srv.URL)
	t.Setenv(tracing.EnvSDKDisabled, "true")
	shutdown, err := tracing.Setup(context.Background(), "realm-test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, names := col.spans(); len(names) > 0 {
		t.Errorf("exported %v with the SDK disabled", names)
	}
	if _, ok := otel.GetTracerProvider().(noop.TracerProvider); !ok {
		t.Errorf("provider is %T, want the no-op provider", otel.GetTracerProvider())
	}
}

// Handler continues the trace of a request's traceparent, and Transport
// sends the caller's span as the next hop's parent.
func TestHTTPHopsContinueTheTrace(t *testing.T) {
	rec, tp := recording(t)

	seen := make(chan trace.SpanContext, 2)
	srv := httptest.NewServer(tracing.Handler("webhook", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- trace.SpanContextFromContext(r.Context())
	})))
	defer srv.Close()
	serverSpan := func(tid trace.TraceID) sdktrace.ReadOnlySpan {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindServer && s.SpanContext().TraceID() == tid {
					return s
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("no server span in trace %s", tid)
		return nil
	}

	// A traceparent header from a caller we do not instrument.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/x", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	pid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	s := serverSpan(tid)
	if s.Parent().SpanID() != pid || !s.Parent().IsRemote() {
		t.Errorf("server span parent %s (remote %v), want %s", s.Parent().SpanID(), s.Parent().IsRemote(), pid)
	}
	if got := <-seen; got.SpanID() != s.SpanContext().SpanID() {
		t.Errorf("handler's ctx span %s, want the server span %s", got.SpanID(), s.SpanContext().SpanID())
	}

	// An instrumented caller: its client span is the server span's parent.
	ctx, root := tp.Tracer("test").Start(context.Background(), "caller")
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/mcp", nil)
	resp, err = (&http.Client{Transport: tracing.Transport(nil)}).Do(req)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-seen
	s = serverSpan(root.SpanContext().TraceID())
	var client sdktrace.ReadOnlySpan
	for _, c := range rec.Ended() {
		if c.SpanKind() == trace.SpanKindClient && c.SpanContext().TraceID() == root.SpanContext().TraceID() {
			client = c
		}
	}
	if client == nil || client.Parent().SpanID() != root.SpanContext().SpanID() || s.Parent().SpanID() != client.SpanContext().SpanID() {
		t.Errorf("want caller → client span → server span; client %v, server parent %s", client, s.Parent().SpanID())
	}
}

// Continue carries the request's span and baggage, not its cancellation.
func TestContinueCarriesTheTraceNotTheCancellation(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	m, _ := baggage.NewMember("tenant", "acme")
	b, _ := baggage.New(m)
	req, cancel := context.WithCancel(baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), b))
	cancel()
	got := tracing.Continue(context.Background(), req)
	if got.Err() != nil {
		t.Error("the request's cancellation came along")
	}
	if !trace.SpanContextFromContext(got).Equal(sc) {
		t.Errorf("span %v, want %v", trace.SpanContextFromContext(got), sc)
	}
	if v := baggage.FromContext(got).Member("tenant").Value(); v != "acme" {
		t.Errorf("baggage tenant = %q", v)
	}
}

// grpcCollector is an OTLP/gRPC trace receiver.
type grpcCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (c *grpcCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports over OTLP/gRPC instead.
func TestSetupExportsOverOTLPGRPCWhenAsked(t *testing.T) {
	restoreGlobals(t)
	clearEnv(t)
	col := &grpcCollector{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, col)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	t.Setenv(tracing.EnvEndpoint, "http://"+lis.Addr().String())
	t.Setenv(tracing.EnvProtocol, "grpc")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shutdown, err := tracing.Setup(ctx, "realm-test")
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(ctx, "work")
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if !slices.Equal(col.names, []string{"work"}) {
		t.Errorf("collector got %v, want [work]", col.names)
	}
}

func TestStopHandsAFailedShutdownToWarn(t *testing.T) {
	var got error
	var deadline bool
	tracing.Stop(func(ctx context.Context) error {
		_, deadline = ctx.Deadline()
		return errors.New("collector gone")
	}, func(err error) { got = err })
	if got == nil || got.Error() != "collector gone" || !deadline {
		t.Errorf("warned %v, shutdown had a deadline: %v", got, deadline)
	}
	got = nil
	tracing.Stop(func(context.Context) error { return nil }, func(err error) { got = err })
	if got != nil {
		t.Errorf("a clean shutdown warned %v", got)
	}
}

// Without an exporter the handlers only carry the trace context, and it
// still crosses an HTTP hop and then a gRPC hop into the next service's
// handler, baggage included; a request without one starts none. The
// services dial with client.Instrumented, which folds the carrying into
// the metrics interceptor: the trace crosses that way too, and the calls
// are counted.
func TestWithoutAnExporterTheTraceStillCrossesHTTPAndGRPC(t *testing.T) {
	for _, tc := range []struct {
		name string
		dial func(prometheus.Registerer) []grpc.DialOption
		// counted: the calls are in the registry's gRPC client metrics.
		counted bool
	}{
		{"tracing.DialOptions", func(prometheus.Registerer) []grpc.DialOption { return tracing.DialOptions() }, false},
		{"client.Instrumented", client.Instrumented, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			crossesHTTPAndGRPC(t, func() []grpc.DialOption { return tc.dial(reg) })
			if !tc.counted {
				return
			}
			// Two requests, each a Check and a Watch.
			for _, method := range []string{"Check", "Watch"} {
				if got, err := started(reg, method); err != nil || got != 2 {
					t.Errorf("grpc_client_started_total for %s: %v (%v), want 2", method, got, err)
				}
			}
		})
	}
}

// started sums grpc_client_started_total for method in reg.
func started(reg prometheus.Gatherer, method string) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "grpc_client_started_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_method" && l.GetValue() == method {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n, nil
}

// crossesHTTPAndGRPC sends requests with and without a traceparent and
// baggage through an HTTP hop into a unary and a streaming gRPC call made
// on a connection with dial's options (built after Setup), and checks what
// the gRPC handlers saw.
func crossesHTTPAndGRPC(t *testing.T, dial func() []grpc.DialOption) {
	restoreGlobals(t)
	clearEnv(t)
	shutdown, err := tracing.Setup(context.Background(), "realm-test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()

	type hop struct {
		sc     trace.SpanContext
		tenant string
	}
	seen := make(chan hop, 2)
	// The service's own interceptors come after the tracing options, as
	// each main orders them.
	gs := grpc.NewServer(append(tracing.ServerOptions(), grpc.ChainUnaryInterceptor(
		func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			seen <- hop{trace.SpanContextFromContext(ctx), baggage.FromContext(ctx).Member("tenant").Value()}
			return h(ctx, req)
		}), grpc.ChainStreamInterceptor(
		func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx := ss.Context()
			seen <- hop{trace.SpanContextFromContext(ctx), baggage.FromContext(ctx).Member("tenant").Value()}
			return h(srv, ss)
		}))...)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	hc := healthpb.NewHealthClient(loopback(t, gs, dial()...))
	srv := httptest.NewServer(tracing.Handler("mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := hc.Check(r.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		// And a streaming call (Watch answers once at once).
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = watch.Recv()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	})))
	defer srv.Close()

	// call returns what the unary call's handler saw, after checking the
	// streaming call's saw the same.
	call := func(header map[string]string) hop {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		unary, stream := <-seen, <-seen
		if !stream.sc.Equal(unary.sc) || stream.tenant != unary.tenant {
			t.Errorf("the streaming call's handler saw %+v, the unary call's %+v", stream, unary)
		}
		return unary
	}
	got := call(map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "baggage": "tenant=acme"})
	if got.sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || got.sc.SpanID().String() != "00f067aa0ba902b7" || !got.sc.IsRemote() {
		t.Errorf("the gRPC handler's span context is %v, want the caller's trace and span, remote", got.sc)
	}
	if got.tenant != "acme" {
		t.Errorf("baggage tenant %q at the gRPC handler, want acme", got.tenant)
	}
	if got := call(nil); got.sc.IsValid() || got.tenant != "" {
		t.Errorf("a request without trace context reached the gRPC handler with %v, tenant %q", got.sc, got.tenant)
	}
}

// loopback serves gs over loopback until the test ends, and returns a
// connection to it with dial's options.
func loopback(t *testing.T, gs *grpc.Server, dial ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// While the provider records, client.Instrumented is the metrics and
// otelgrpc's span per call: the call is counted, and its client span is a
// child of the caller's.
func TestInstrumentedRecordsASpanPerCallWhenTracingRecords(t *testing.T) {
	rec, tp := recording(t)

	// Any service but health, whose calls the spans leave out.
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, &grpcCollector{})
	reg := prometheus.NewRegistry()
	tc := coltracepb.NewTraceServiceClient(loopback(t, gs, client.Instrumented(reg)...))
	ctx, root := tp.Tracer("test").Start(context.Background(), "caller")
	_, err := tc.Export(ctx, &coltracepb.ExportTraceServiceRequest{})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	var span sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient && s.Name() == "opentelemetry.proto.collector.trace.v1.TraceService/Export" {
			span = s
		}
	}
	if span == nil || span.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("client span %v, want one for Export under the caller's span %s", span, root.SpanContext().SpanID())
	}
	if n, err := started(reg, "Export"); err != nil || n != 1 {
		t.Errorf("grpc_client_started_total for Export: %v (%v), want 1", n, err)
	}
}
