package store

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Due returns up to limit members of a bucket index whose score is at or
// below upTo, across every bucket, in one pipelined round trip. Timers use
// it: the "expiries" index holds each run with an open gate that can
// expire, scored by its expiry time in milliseconds.
func (r *Redis) Due(ctx context.Context, index string, upTo float64, limit int) ([]string, error) {
	return r.DueAfter(ctx, index, math.Inf(-1), upTo, limit)
}

// DueAfter is Due for the members scored above after (exclusive) and at or
// below upTo: the claims sweep skips claims of unknown age (scored 0).
func (r *Redis) DueAfter(ctx context.Context, index string, after, upTo float64, limit int) ([]string, error) {
	if err := validName(index); err != nil {
		return nil, err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	max := strconv.FormatFloat(upTo, 'f', -1, 64)
	min := "-inf"
	if !math.IsInf(after, -1) {
		min = "(" + strconv.FormatFloat(after, 'f', -1, 64)
	}
	cmds := make([]*redis.StringSliceCmd, r.buckets)
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := 0; b < r.buckets; b++ {
			cmds[b] = p.ZRangeByScore(ctx, r.IndexKey(b, index), &redis.ZRangeBy{Min: min, Max: max, Count: int64(limit)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: due %s: %w", index, err)
	}
	var out []string
	for _, c := range cmds {
		for _, m := range c.Val() {
			if len(out) == limit {
				return out, nil
			}
			out = append(out, m)
		}
	}
	return out, nil
}
