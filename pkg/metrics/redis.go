package metrics

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// RedisHook times every Redis round trip (one command, or one pipeline or
// transaction as a whole) by operation and result. Add it with
// client.AddHook; register it once per registry.
func RedisHook(reg prometheus.Registerer) redis.Hook {
	h := &redisHook{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "redis_round_trip_seconds",
			Help:    "Redis round trips by operation (the command name, or pipeline) and result (ok, nil, error).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op", "result"}),
	}
	reg.MustRegister(h.latency)
	return h
}

type redisHook struct{ latency *prometheus.HistogramVec }

func (h *redisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		began := time.Now()
		err := next(ctx, cmd)
		h.latency.WithLabelValues(cmd.Name(), result(err)).Observe(time.Since(began).Seconds())
		return err
	}
}

func (h *redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		began := time.Now()
		err := next(ctx, cmds)
		h.latency.WithLabelValues("pipeline", result(err)).Observe(time.Since(began).Seconds())
		return err
	}
}

// result labels a command's outcome; redis.Nil (no such key) is an
// answer, not a failure.
func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redis.Nil):
		return "nil"
	}
	return "error"
}
