// Package limit bounds how many drives run at once. Past the limit a
// drive waits its turn (a queue, not a refusal). The Redis limiter is
// shared by every agent-svc replica; the local one bounds one process.
package limit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter hands out drive slots.
type Limiter interface {
	// Acquire waits for a slot, in arrival order, until ctx is done.
	// queued is called once, with the drives ahead, if the slot is not
	// free at once.
	Acquire(ctx context.Context, queued func(ahead int)) (*Slot, error)
}

// Slot is one drive's place under the limit.
type Slot struct {
	release func()
	lost    chan struct{}
}

// Release gives the slot back; it is safe to call more than once.
func (s *Slot) Release() { s.release() }

// Lost is closed when the slot is no longer this drive's (its lease ran
// out and another drive may hold it): the drive must stop calling models
// and take a slot again.
func (s *Slot) Lost() <-chan struct{} { return s.lost }

// Local is a process-local limiter.
type Local struct {
	slots chan struct{}
	mu    sync.Mutex
	wait  int
}

// NewLocal bounds one process to n drives (n < 1 is 1).
func NewLocal(n int) *Local {
	return &Local{slots: make(chan struct{}, max(1, n))}
}

// Acquire implements Limiter. A channel send is FIFO among blocked
// senders closely enough for a laptop stack.
func (l *Local) Acquire(ctx context.Context, queued func(int)) (*Slot, error) {
	select {
	case l.slots <- struct{}{}:
		return l.releaser(), nil
	default:
	}
	l.mu.Lock()
	ahead := l.wait
	l.wait++
	l.mu.Unlock()
	defer func() { l.mu.Lock(); l.wait--; l.mu.Unlock() }()
	if queued != nil {
		queued(ahead + 1)
	}
	select {
	case l.slots <- struct{}{}:
		return l.releaser(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// releaser is a slot of this process's: it is never lost.
func (l *Local) releaser() *Slot {
	var once sync.Once
	return &Slot{release: func() { once.Do(func() { <-l.slots }) }, lost: make(chan struct{})}
}

// Redis is the global limiter: a sorted-set lease semaphore.
//
//	<prefix>:holders  member = lease id, score = lease expiry (ms)
//	<prefix>:queue    member = lease id, score = arrival ticket
//	<prefix>:alive    member = lease id, score = waiter expiry (ms)
//	<prefix>:ticket   arrival counter
//
// A holder renews its lease every TTL/3; a crashed holder's lease expires
// and its slot frees itself. A waiter that stops polling drops out of the
// queue the same way, so a dead replica never blocks the line.
type Redis struct {
	rc     redis.UniversalClient
	prefix string
	n      int
	ttl    time.Duration
	poll   time.Duration
	now    func() time.Time
}

// RedisOptions tune the Redis limiter; zero values take the defaults.
type RedisOptions struct {
	// Prefix of its keys (default "realm:agent:drives").
	Prefix string
	// TTL of a lease and of a waiter's place (default 30s).
	TTL time.Duration
	// Poll is how often a waiter asks again (default 100ms).
	Poll time.Duration
}

// NewRedis bounds every process sharing rc and prefix to n drives.
func NewRedis(rc redis.UniversalClient, n int, o RedisOptions) *Redis {
	if o.Prefix == "" {
		o.Prefix = "realm:agent:drives"
	}
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	return &Redis{rc: rc, prefix: "{" + o.Prefix + "}", n: max(1, n), ttl: o.TTL, poll: o.Poll, now: time.Now}
}

// acquireScript: drop expired holders and dead waiters, keep this waiter's
// place (or take a ticket), and take a slot when the waiter is within the
// free slots at the head of the queue. Returns -1 when the slot was taken,
// else the waiter's position (1 = next).
var acquireScript = redis.NewScript(`
local holders, queue, alive, ticket = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, leaseUntil, aliveUntil, limit, id = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
local dead = redis.call('ZRANGEBYSCORE', alive, '-inf', now)
for _, d in ipairs(dead) do
  redis.call('ZREM', queue, d)
  redis.call('ZREM', alive, d)
end
if redis.call('ZSCORE', queue, id) == false then
  redis.call('ZADD', queue, redis.call('INCR', ticket), id)
end
redis.call('ZADD', alive, aliveUntil, id)
local rank = redis.call('ZRANK', queue, id)
local free = limit - redis.call('ZCARD', holders)
if rank < free then
  redis.call('ZREM', queue, id)
  redis.call('ZREM', alive, id)
  redis.call('ZADD', holders, leaseUntil, id)
  return -1
end
return rank - free + 1
`)

// renewScript extends a lease that still exists; 0 means it was lost.
var renewScript = redis.NewScript(`
if redis.call('ZSCORE', KEYS[1], ARGV[2]) == false then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
return 1
`)

func (r *Redis) keys() []string {
	return []string{r.prefix + ":holders", r.prefix + ":queue", r.prefix + ":alive", r.prefix + ":ticket"}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Acquire implements Limiter.
func (r *Redis) Acquire(ctx context.Context, queued func(int)) (*Slot, error) {
	id := newID()
	told := false
	for {
		now := r.now()
		pos, err := acquireScript.Run(ctx, r.rc, r.keys(), ms(now), ms(now.Add(r.ttl)), ms(now.Add(r.ttl)), r.n, id).Int()
		if err != nil {
			r.leave(id)
			return nil, err
		}
		if pos < 0 {
			return r.hold(id), nil
		}
		if !told && queued != nil {
			queued(pos)
			told = true
		}
		select {
		case <-ctx.Done():
			r.leave(id)
			return nil, ctx.Err()
		case <-time.After(r.poll):
		}
	}
}

// hold keeps the lease renewed until released. A renewal that finds the
// lease gone (it expired and was dropped, so another drive may hold the
// slot) loses the slot, and so does two thirds of a TTL without a
// confirmed renewal: the holder stops a third of a TTL before its lease
// can expire and be given to another drive (clocks agreeing), so the
// limit is not exceeded while Redis cannot be reached.
func (r *Redis) hold(id string) *Slot {
	done := make(chan struct{})
	lost := make(chan struct{})
	go func() {
		t := time.NewTicker(r.ttl / 3)
		defer t.Stop()
		confirmed := r.now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), r.ttl/3)
				ok, err := renewScript.Run(ctx, r.rc, r.keys()[:1], ms(r.now().Add(r.ttl)), id).Int()
				cancel()
				switch {
				case err == nil && ok == 1:
					confirmed = r.now()
					continue
				case err != nil && r.now().Sub(confirmed) < r.ttl*2/3:
					continue // not confirmed yet, but the lease runs well past now
				}
				close(lost)
				return
			}
		}
	}()
	var once sync.Once
	return &Slot{lost: lost, release: func() {
		once.Do(func() {
			close(done)
			r.leave(id)
		})
	}}
}

// leave removes id as a holder and as a waiter.
func (r *Redis) leave(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k := r.keys()
	pipe := r.rc.TxPipeline()
	pipe.ZRem(ctx, k[0], id)
	pipe.ZRem(ctx, k[1], id)
	pipe.ZRem(ctx, k[2], id)
	_, _ = pipe.Exec(ctx)
}

// Holders counts live leases (for tests and health).
func (r *Redis) Holders(ctx context.Context) (int64, error) {
	return r.rc.ZCount(ctx, r.keys()[0], "("+strconv.FormatInt(ms(r.now()), 10), "+inf").Result()
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}
