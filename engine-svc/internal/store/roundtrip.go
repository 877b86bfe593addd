package store

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RoundTripCounter is a go-redis hook counting round trips to the server: a
// command counts one, a pipeline (or MULTI/EXEC) counts one whatever its
// length. Benchmarks and tests use it to prove that a load and a commit are
// one round trip each. Install it with Options.Counter or client.AddHook.
type RoundTripCounter struct {
	n atomic.Int64
}

var _ redis.Hook = (*RoundTripCounter)(nil)

// Count returns the round trips since creation or the last Reset.
func (c *RoundTripCounter) Count() int64 { return c.n.Load() }

// Reset sets the count to zero.
func (c *RoundTripCounter) Reset() { c.n.Store(0) }

// DialHook passes dials through uncounted: connection setup is not a
// request round trip.
func (c *RoundTripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts one round trip per command.
func (c *RoundTripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts one round trip per pipeline.
func (c *RoundTripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}
