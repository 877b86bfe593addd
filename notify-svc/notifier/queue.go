package notifier

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The notifier's own keys share one hash tag, so each script below runs
// on one Redis Cluster slot:
//
//	<prefix>:{notify}:gates  hash: gate key (<run>@<opened ms>) -> record JSON
//	<prefix>:{notify}:due    zset: <kind>|<gate key> -> due time (ms)
//	<prefix>:{notify}:threads hash: thread anchor (ts) -> gate key
//	<prefix>:{notify}:nudges hash: gate key -> "Please reply with one of" posts
//	<prefix>:{notify}:claims hash: job -> times claimed since it was scheduled
//	<prefix>:{notify}:event:<id>  string: a Slack event id seen (1 h)
//
// A job is claimed by moving its score a lease into the future, and
// finished only by the claimer (the score it set is still there). So two
// replicas never run one job at once, and a replica killed while holding
// a job leaves it to be run again when the lease ends: a post is never
// lost. A job claimed a second time may have had its post made by the
// claimer that died between Slack's answer and the finish, so it looks
// in Slack for that post before posting (notifier.go, "again").

// trackScript starts following a gate: its record and its "open" job.
//
//	KEYS: gates, due   ARGV: gate key, now
var trackScript = redis.NewScript(`
if redis.call('HSETNX', KEYS[1], ARGV[1], '{}') == 1 then
  redis.call('ZADD', KEYS[2], ARGV[2], 'open|' .. ARGV[1])
  return 1
end
return 0
`)

// claimScript takes the earliest due job, leases it until ARGV[2] and
// counts the claim: the job and how often it was claimed.
//
//	KEYS: due, claims   ARGV: now, lease until
var claimScript = redis.NewScript(`
local m = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1)
if #m == 0 then return false end
redis.call('ZADD', KEYS[1], ARGV[2], m[1])
return {m[1], redis.call('HINCRBY', KEYS[2], m[1], 1)}
`)

// finishScript ends a claimed job if the claim still holds: sets (or,
// with "-", deletes) the gate's record and schedules the next jobs, unless
// the gate's resolution is already scheduled (then only its own job may
// follow).
//
//	KEYS: gates, due, claims   ARGV: job, lease until, gate key, record ("" keep, "-" delete), then score/job pairs
var finishScript = redis.NewScript(`
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s or tonumber(s) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if ARGV[4] == '-' then
  redis.call('HDEL', KEYS[1], ARGV[3])
elseif ARGV[4] ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[3]) == 1 then
  redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
end
local resolving = redis.call('ZSCORE', KEYS[2], 'resolved|' .. ARGV[3])
for i = 5, #ARGV, 2 do
  if not resolving or string.sub(ARGV[i + 1], 1, 9) == 'resolved|' then
    redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
return 1
`)

// resolveScript turns a followed gate that left the outbox into its
// resolution job, dropping its pending reminder and escalation (and
// their claim counts: no finish will clear them).
//
//	KEYS: gates, due, claims   ARGV: gate key, now
var resolveScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('ZSCORE', KEYS[2], 'resolved|' .. ARGV[1]) then return 0 end
redis.call('ZREM', KEYS[2], 'remind|' .. ARGV[1], 'escalate|' .. ARGV[1])
redis.call('HDEL', KEYS[3], 'remind|' .. ARGV[1], 'escalate|' .. ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], 'resolved|' .. ARGV[1])
return 1
`)

// queue is the notifier's durable state in Redis.
type queue struct {
	rc                                      redis.UniversalClient
	tag, gates, due, threads, nudge, claims string
	leaseMillis                             int64
}

func newQueue(rc redis.UniversalClient, prefix string, leaseMillis int64) *queue {
	tag := prefix + ":{notify}:"
	return &queue{rc: rc, tag: tag, gates: tag + "gates", due: tag + "due", threads: tag + "threads", nudge: tag + "nudges", claims: tag + "claims", leaseMillis: leaseMillis}
}

func (q *queue) tracked(ctx context.Context) ([]string, error) {
	return q.rc.HKeys(ctx, q.gates).Result()
}

func (q *queue) track(ctx context.Context, key string, now int64) error {
	return trackScript.Run(ctx, q.rc, []string{q.gates, q.due}, key, now).Err()
}

func (q *queue) resolve(ctx context.Context, key string, now int64) error {
	return resolveScript.Run(ctx, q.rc, []string{q.gates, q.due, q.claims}, key, now).Err()
}

// claim returns a due job, its lease and how often it was claimed ("" when
// none is due).
func (q *queue) claim(ctx context.Context, now int64) (job string, lease, claims int64, err error) {
	lease = now + q.leaseMillis
	res, err := claimScript.Run(ctx, q.rc, []string{q.due, q.claims}, now, lease).Slice()
	if errors.Is(err, redis.Nil) {
		return "", 0, 0, nil
	}
	if err != nil {
		return "", 0, 0, err
	}
	job, _ = res[0].(string)
	claims, _ = res[1].(int64)
	return job, lease, claims, nil
}

// next is a job to schedule when one finishes.
type next struct {
	at  int64
	job string
}

// finish ends a claimed job; false when its lease had passed to another.
func (q *queue) finish(ctx context.Context, job string, lease int64, key, record string, then ...next) (bool, error) {
	args := []any{job, lease, key, record}
	for _, n := range then {
		args = append(args, n.at, n.job)
	}
	ok, err := finishScript.Run(ctx, q.rc, []string{q.gates, q.due, q.claims}, args...).Int()
	return ok == 1, err
}

func (q *queue) record(ctx context.Context, key string) (string, error) {
	return q.rc.HGet(ctx, q.gates, key).Result()
}

func (q *queue) pending(ctx context.Context, job string) (bool, error) {
	err := q.rc.ZScore(ctx, q.due, job).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// gateKey names one opening of a gate: a run reopens gates, each with
// its own opened_at.
func gateKey(run string, openedMS int64) string { return run + "@" + strconv.FormatInt(openedMS, 10) }
