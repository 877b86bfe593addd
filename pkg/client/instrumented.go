package client

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/tracing"
)

// Instrumented are the dial options of a service's connection to another:
// gRPC client metrics into reg (metrics.GRPCClient) and the caller's trace
// carried on each call (tracing.DialOptions). Build them after
// tracing.Setup, once per registry.
//
// While tracing records nothing, carrying the trace is a step of the
// metrics interceptor rather than an interceptor of its own. gRPC chains two
// interceptors with a closure made on every call and two more frames on its
// stack, and those frames are what took the goroutine go-sdk starts for
// each MCP call past its first stack size: the door paid a stack copy on
// every execute_step (docs/benchmarks.md).
func Instrumented(reg prometheus.Registerer) []grpc.DialOption {
	inject := tracing.Injector()
	if inject == nil {
		return append(metrics.GRPCClient(reg), tracing.DialOptions()...)
	}
	unary, stream := metrics.GRPCClientInterceptors(reg)
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return unary(inject(ctx), method, req, reply, cc, invoker, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return stream(inject(ctx), desc, cc, method, streamer, opts...)
		}),
	}
}
