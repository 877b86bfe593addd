// Package ratelimit keeps rate limits in Redis (the webhook triggers'
// of listen-svc, the services' rate_limit of engine-svc), so every replica
// sharing the Redis draws on one bucket per trigger or service and together
// they serve the limit, not the limit times the replicas.
//
// The bucket is GCRA (the generic cell rate algorithm): one key per
// bucket holds its theoretical arrival time, the moment the bucket would be
// full again. A request is served when that moment is less than burst−1
// emission intervals away, and pushes it one interval on. That is a token
// bucket of burst tokens refilled at per_second, the same as the in-process
// limiter, kept in a single value, changed by one script (so on Redis
// Cluster too: one key, one slot). The clock is the Redis server's (TIME),
// so replicas whose clocks disagree still share one bucket.
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts every bucket's key unless told otherwise:
// <prefix>:<first 32 hex of sha256(bucket name)>.
const DefaultPrefix = "realm:listen:rate"

// Redis is a set of rate-limit buckets in Redis.
type Redis struct {
	rc     redis.UniversalClient
	prefix string
}

// NewRedis returns buckets kept in rc; prefix "" is DefaultPrefix.
func NewRedis(rc redis.UniversalClient, prefix string) *Redis {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Redis{rc: rc, prefix: prefix}
}

// takeScript is one request to a bucket.
//
//	KEYS: the bucket   ARGV: 1 emission interval (µs, whole), 2 burst
//
// Replies 0 when the request is served (the bucket's time moves one
// interval on), else how many µs until one would be (nothing taken). The
// key lives only as long as its bucket is not full, so idle triggers
// leave nothing behind.
var takeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local allowAt = tat - interval * (tonumber(ARGV[2]) - 1)
if now < allowAt then return allowAt - now end
local nextTat = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', nextTat), 'PX', math.ceil((nextTat - now) / 1000) + 1)
return 0
`)

// Take asks bucket name (perSecond requests a second, burst at once) to
// serve one request: 0 when it is served, else how long until the bucket
// would serve one (a refused request takes nothing).
func (r *Redis) Take(ctx context.Context, name string, perSecond float64, burst int) (time.Duration, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return 0, errors.New("ratelimit: per_second must be a positive number")
	}
	// Whole microseconds: the script's arithmetic stays exact in Lua's
	// doubles (now is about 2^51 µs).
	interval := max(int64(math.Round(1e6/perSecond)), 1)
	sum := sha256.Sum256([]byte(name))
	key := r.prefix + ":" + hex.EncodeToString(sum[:16])
	us, err := takeScript.Run(ctx, r.rc, []string{key}, interval, max(burst, 1)).Int64()
	if err != nil {
		return 0, fmt.Errorf("ratelimit: %w", err)
	}
	return time.Duration(us) * time.Microsecond, nil
}
