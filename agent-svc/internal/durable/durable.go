// Package durable keeps the drives agent-svc owes in Redis, so a drive
// outlives the process that took it: a detached drive is written down as
// wanted with its request, the process driving it holds a lease it renews,
// and any agent-svc whose pickup finds a wanted run with no live lease
// takes it and goes on from the run's record (the record is the state:
// nothing recorded is redone).
//
//	{<prefix>}:wanted        zset: run id -> when it was wanted (ms)
//	{<prefix>}:req:<run>     string: the drive's request (protobuf)
//	{<prefix>}:lease:<run>   string: the holder's id, expiring with its lease
//
// The hash tag keeps the book in one Cluster slot.
package durable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Book is the drives owed, shared by every agent-svc on one Redis.
type Book struct {
	rc     redis.UniversalClient
	prefix string
	ttl    time.Duration
	id     string // this process, as a lease holder
}

// New returns a book under prefix (default "realm:agent:book") whose leases
// last ttl (default 30s) unless renewed.
func New(rc redis.UniversalClient, prefix string, ttl time.Duration) *Book {
	if prefix == "" {
		prefix = "realm:agent:book"
	}
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Book{rc: rc, prefix: "{" + prefix + "}", ttl: ttl, id: hex.EncodeToString(b[:])}
}

// TTL is a lease's life between renewals.
func (b *Book) TTL() time.Duration { return b.ttl }

func (b *Book) wantedKey() string          { return b.prefix + ":wanted" }
func (b *Book) reqKey(run string) string   { return b.prefix + ":req:" + run }
func (b *Book) leaseKey(run string) string { return b.prefix + ":lease:" + run }

// Want writes a run down as owed a drive, with its request, and takes its
// lease for this process. It reports whether the lease was taken (false:
// another process holds it and drives the run).
func (b *Book) Want(ctx context.Context, run string, req []byte) (bool, error) {
	now := time.Now().UnixMilli()
	var lease *redis.BoolCmd
	_, err := b.rc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, b.reqKey(run), req, 0)
		p.ZAddNX(ctx, b.wantedKey(), redis.Z{Score: float64(now), Member: run})
		lease = p.SetNX(ctx, b.leaseKey(run), b.id, b.ttl)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("durable: want %s: %w", run, err)
	}
	return lease.Val(), nil
}

// Take leases a wanted run for this process, if no one holds it.
func (b *Book) Take(ctx context.Context, run string) (bool, error) {
	ok, err := b.rc.SetNX(ctx, b.leaseKey(run), b.id, b.ttl).Result()
	if err != nil {
		return false, fmt.Errorf("durable: take %s: %w", run, err)
	}
	return ok, nil
}

var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`)

var doneScript = redis.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
if redis.call('GET', KEYS[3]) == ARGV[2] then redis.call('DEL', KEYS[3]) end
return 1
`)

// ErrLeaseLost is Renew's answer when the lease is no longer this
// process's: another may be driving the run.
var ErrLeaseLost = errors.New("durable: lease lost")

// Renew extends this process's lease on run.
func (b *Book) Renew(ctx context.Context, run string) error {
	n, err := renewScript.Run(ctx, b.rc, []string{b.leaseKey(run)}, b.id, b.ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("durable: renew %s: %w", run, err)
	}
	if n == 0 {
		return ErrLeaseLost
	}
	return nil
}

// Release gives the lease up, leaving the run wanted: another process
// takes it at its next pickup.
func (b *Book) Release(ctx context.Context, run string) error {
	return releaseScript.Run(ctx, b.rc, []string{b.leaseKey(run)}, b.id).Err()
}

// Done removes a run from the book: its drive ended (the run ended, or the
// drive stopped on something a new drive would meet again).
func (b *Book) Done(ctx context.Context, run string) error {
	return doneScript.Run(ctx, b.rc, []string{b.wantedKey(), b.reqKey(run), b.leaseKey(run)}, run, b.id).Err()
}

// Wanted lists up to limit runs owed a drive, oldest first.
func (b *Book) Wanted(ctx context.Context, limit int) ([]string, error) {
	return b.rc.ZRange(ctx, b.wantedKey(), 0, int64(limit)-1).Result()
}

// Request is a wanted run's drive request.
func (b *Book) Request(ctx context.Context, run string) ([]byte, error) {
	return b.rc.Get(ctx, b.reqKey(run)).Bytes()
}
