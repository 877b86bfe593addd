// Package metrics holds what every Realm service shares for Prometheus: a
// registry with the Go and process collectors, the gRPC server instruments
// and a small /metrics listener whose lifetime is bound to a context.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
)

// Namespace prefixes every Realm metric.
const Namespace = "realm"

// NewRegistry returns a registry that already carries the Go runtime and
// process collectors, so each service adds only its own instruments.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// GRPCServer registers the standard gRPC server instruments (calls started,
// handled by code, handling-time histogram) and returns the server options
// that feed them.
func GRPCServer(reg prometheus.Registerer) []grpc.ServerOption {
	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}),
	))
	reg.MustRegister(m)
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(m.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(m.StreamServerInterceptor()),
	}
}

// Server is a running /metrics listener.
type Server struct {
	addr string
	done chan error
}

// Addr is the address the listener bound (useful with port 0).
func (s *Server) Addr() string { return s.addr }

// Wait blocks until the listener has stopped and returns why, nil after a
// clean shutdown.
func (s *Server) Wait() error { return <-s.done }

// Serve listens on addr and serves /metrics (and /healthz) until ctx ends,
// then shuts down within a few seconds. An empty addr serves nothing and
// returns nil, nil.
//
// With ready it also serves GET /readyz: 200 while every ready check
// passes, 503 with the first failure otherwise. Kubernetes probes use it
// where gRPC health cannot be asked (a gRPC probe does not speak TLS).
func Serve(ctx context.Context, log *slog.Logger, addr string, g prometheus.Gatherer, ready ...Ready) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(g))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	if len(ready) > 0 {
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
			for _, check := range ready {
				if err := check(r.Context()); err != nil {
					http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
			_, _ = w.Write([]byte("ready\n"))
		})
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s := &Server{addr: lis.Addr().String(), done: make(chan error, 1)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(lis) }()
	go func() {
		var err error
		select {
		case err = <-serveErr:
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err = hs.Shutdown(sctx)
			cancel()
			if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) && err == nil {
				err = serr
			}
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	if log != nil {
		log.Info("metrics listening", "addr", s.addr, "path", "/metrics")
	}
	return s, nil
}

// HTTP counts and times the requests h serves, labelled with name (one
// front door) and the response code. Call it once per name and registry.
func HTTP(reg prometheus.Registerer, name string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"handler": name}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "http_requests_total", ConstLabels: labels,
		Help: "HTTP requests served, by response code and method.",
	}, []string{"code", "method"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "http_request_duration_seconds", ConstLabels: labels,
		Help:    "Time to serve an HTTP request (a streamed MCP response counts until it ends).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"code", "method"})
	reg.MustRegister(requests, duration)
	return promhttp.InstrumentHandlerCounter(requests, promhttp.InstrumentHandlerDuration(duration, h))
}

// GRPCClient registers the standard gRPC client instruments (calls started,
// handled by code, handling-time histogram) and returns the dial options
// that feed them. Register once per registry and share the options among
// the process's connections.
func GRPCClient(reg prometheus.Registerer) []grpc.DialOption {
	unary, stream := GRPCClientInterceptors(reg)
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// GRPCClientInterceptors registers the instruments GRPCClient does and
// returns its interceptors themselves, for a connection that folds other
// work into them (client.Instrumented).
func GRPCClientInterceptors(reg prometheus.Registerer) (grpc.UnaryClientInterceptor, grpc.StreamClientInterceptor) {
	m := grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}),
	))
	reg.MustRegister(m)
	return m.UnaryClientInterceptor(), m.StreamClientInterceptor()
}
