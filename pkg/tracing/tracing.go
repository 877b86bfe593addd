// Package tracing holds what every Realm service shares for OpenTelemetry
// traces: one Setup that installs the global tracer provider and the W3C
// propagators, and the gRPC and HTTP instrumentation that uses them.
//
// Tracing is off unless configured the standard way: spans are exported
// over OTLP only when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_SDK_DISABLED is not
// true). Otherwise Setup installs only the propagators, so a traceparent a
// caller sends still reaches the next hop, and records nothing.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc/filters"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The standard OpenTelemetry environment variables Setup reads itself; the
// exporters and the SDK read the rest (headers, timeouts, sampler, batch
// sizes, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Exporting reports whether the environment asks for spans to be
// exported: an OTLP endpoint is set and the SDK is not disabled.
func Exporting() bool { return exporting(os.Getenv) }

func exporting(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false
	}
	return getenv(EnvEndpoint) != "" || getenv(EnvTracesEndpoint) != ""
}

// protocol is the OTLP transport the environment names: "grpc" or
// "http/protobuf" (the specification's default).
func protocol(getenv func(string) string) string {
	p := getenv(EnvTracesProtocol)
	if p == "" {
		p = getenv(EnvProtocol)
	}
	if strings.TrimSpace(p) == "grpc" {
		return "grpc"
	}
	return "http/protobuf"
}

// Propagator is the W3C Trace Context and Baggage propagator every Realm
// hop uses.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Setup installs the global propagator and tracer provider for the
// service. When the environment asks for export (see Exporting) the
// provider batches spans to OTLP, over gRPC if the protocol variable says
// "grpc" and over HTTP otherwise; shutdown flushes them and should run
// with a bounded context before the process exits. Otherwise the provider
// is a no-op, nothing is dialled and shutdown does nothing.
func Setup(ctx context.Context, serviceName string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(Propagator())
	if !Exporting() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return func(context.Context) error { return nil }, nil
	}
	var exp sdktrace.SpanExporter
	if protocol(os.Getenv) == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	// The service name given here is the default; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, read later, override it.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// ServerOptions are the gRPC server options that start a span per call,
// as a child of the caller's span when the call carries one. Health
// checks are left out. Built while the provider records nothing (see
// Handler), they only take the caller's trace context from the call's
// metadata.
func ServerOptions() []grpc.ServerOption {
	if recordsNothing() {
		x := extractor{fields: otel.GetTextMapPropagator().Fields()}
		return []grpc.ServerOption{grpc.ChainUnaryInterceptor(x.unary), grpc.ChainStreamInterceptor(x.stream)}
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck()))))}
}

// DialOptions are the gRPC dial options that start a span per outgoing
// call and send its context in the call's metadata. Built while the
// provider records nothing (see Handler), they only send the context.
func DialOptions() []grpc.DialOption {
	if recordsNothing() {
		return []grpc.DialOption{grpc.WithChainUnaryInterceptor(injectUnary), grpc.WithChainStreamInterceptor(injectStream)}
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithFilter(filters.Not(filters.HealthCheck()))))}
}

// Injector is what DialOptions' interceptors do to each outgoing call
// while the provider records nothing: add the context's trace context and
// baggage to the call's metadata. It is nil while the provider records
// (DialOptions is otelgrpc's handler then). A connection with an
// interceptor of its own can apply it there instead of chaining
// DialOptions' (client.Instrumented).
func Injector() func(context.Context) context.Context {
	if recordsNothing() {
		return inject
	}
	return nil
}

// Handler wraps h so each request gets a server span named operation, as a
// child of the request's traceparent when it has one.
//
// Handler, ServerOptions and DialOptions look at the global tracer
// provider when they are built, so a service builds them after Setup.
// While it is the no-op provider Setup installs without an exporter, a
// span would record nothing and the instrumentation's work (attributes,
// metrics on a no-op meter, wrapped bodies) would be spent for nothing:
// they then only carry the trace context from hop to hop, with interceptors
// rather than a stats handler (gRPC allocates each call's events for a
// stats handler): a fraction of the cost (docs/benchmarks.md).
func Handler(operation string, h http.Handler) http.Handler {
	if recordsNothing() {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header)); ctx != r.Context() {
				r = r.WithContext(ctx)
			}
			h.ServeHTTP(w, r)
		})
	}
	return otelhttp.NewHandler(h, operation)
}

// recordsNothing reports whether the global tracer provider is the no-op
// one: spans started now are never recorded or exported.
func recordsNothing() bool {
	_, ok := otel.GetTracerProvider().(noop.TracerProvider)
	return ok
}

// extractor reads the trace context and baggage a call carries in its
// metadata into the call's context. fields are the propagator's keys: a
// call that carries none of them costs nothing.
type extractor struct{ fields []string }

func (x extractor) context(ctx context.Context) context.Context {
	var carrier propagation.MapCarrier
	for _, f := range x.fields {
		if v := metadata.ValueFromIncomingContext(ctx, f); len(v) > 0 {
			if carrier == nil {
				carrier = propagation.MapCarrier{}
			}
			carrier[f] = v[0]
		}
	}
	if carrier == nil {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, carrier)
}

func (x extractor) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(x.context(ctx), req)
}

func (x extractor) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if ctx := x.context(ss.Context()); ctx != ss.Context() {
		ss = contextStream{ss, ctx}
	}
	return h(srv, ss)
}

// contextStream is a server stream with another context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s contextStream) Context() context.Context { return s.ctx }

// inject returns ctx with its trace context and baggage added to the
// outgoing metadata, or ctx itself when it has neither.
func inject(ctx context.Context) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return ctx
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	kv := make([]string, 0, 2*len(carrier))
	for k, v := range carrier {
		kv = append(kv, k, v)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func injectUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoke(inject(ctx), method, req, reply, cc, opts...)
}

func injectStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, stream grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return stream(inject(ctx), desc, cc, method, opts...)
}

// Transport wraps base (http.DefaultTransport when nil) so each outgoing
// request gets a client span and carries its traceparent.
func Transport(base http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(base)
}

// Continue returns dst carrying src's span and baggage, for work that
// outlives the request it serves (its own cancellation, the request's
// trace): the calls made under it stay in the request's trace.
func Continue(dst, src context.Context) context.Context {
	dst = trace.ContextWithSpanContext(dst, trace.SpanContextFromContext(src))
	return baggage.ContextWithBaggage(dst, baggage.FromContext(src))
}

// ShutdownTimeout bounds the flush of buffered spans when a process exits.
const ShutdownTimeout = 5 * time.Second

// Stop runs the shutdown Setup returned, within ShutdownTimeout, and hands
// a failure to warn: a main defers it right after Setup.
func Stop(shutdown func(context.Context) error, warn func(error)) {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		warn(err)
	}
}
