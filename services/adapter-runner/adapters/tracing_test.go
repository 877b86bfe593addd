package adapters_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/pkg/tracing"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
)

// A service call continues the step's trace: the request carries a
// traceparent of the caller's trace, and the client span is recorded.
// Not parallel: it sets the process's tracer provider.
func TestTheServiceRequestContinuesTheStepsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(tracing.Propagator())
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		_ = tp.Shutdown(context.Background())
	})

	svc := newService(t, reply{status: 200, body: `{}`})
	h, err := adapters.NewHTTP("http", nil, loopbackAllowed())
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := tp.Tracer("test").Start(context.Background(), "step")
	_, err = h.Call(ctx, runner.AdapterCall{Method: "fetch", Operation: "orders", Config: map[string]any{"base_url": svc.srv.URL}})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	traceID := span.SpanContext().TraceID().String()
	if got := svc.got()[0].header.Get("Traceparent"); !strings.Contains(got, traceID) {
		t.Errorf("traceparent = %q, want the step's trace %s", got, traceID)
	}
	var client bool
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID().String() == traceID && s.Parent().SpanID() == span.SpanContext().SpanID() {
			client = true
		}
	}
	if !client {
		t.Errorf("no client span under the step's span; spans: %d", len(rec.Ended()))
	}
}
