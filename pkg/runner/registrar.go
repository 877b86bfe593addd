package runner

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// registrar keeps the runner registered with the engine.
type registrar struct {
	client realmv1.RegistryServiceClient
	opts   Options
	req    *realmv1.RegisterRequest
}

// run registers, then renews at a third of the lease, until ctx ends. It
// returns the runner id of the live registration ("" if there is none), for
// Serve to deregister.
func (r *registrar) run(ctx context.Context) string {
	r.req.Lease = durationpb.New(r.opts.Lease)
	for {
		id := r.register(ctx)
		if id == "" {
			return ""
		}
		if !r.renew(ctx, id) {
			return id
		}
		// The engine no longer knows the runner: register again.
	}
}

// register calls Register until it succeeds or ctx ends ("" then).
func (r *registrar) register(ctx context.Context) string {
	for attempt := 1; ; attempt++ {
		resp, err := r.callRegister(ctx)
		if err == nil && resp.GetRunnerId() == "" {
			err = errors.New("the engine answered without a runner_id")
		}
		if err == nil {
			r.opts.Logger.Info("runner: registered", "runner", r.opts.Name, "runner_id", resp.GetRunnerId(),
				"endpoint", r.req.GetEndpoint(), "engine", r.opts.EngineAddr, "handlers", len(r.req.GetHandlers()))
			for _, w := range resp.GetWarnings() {
				r.opts.Logger.Warn("runner: engine warning: "+w, "runner", r.opts.Name)
			}
			return resp.GetRunnerId()
		}
		if ctx.Err() != nil {
			return ""
		}
		wait := backoff(attempt, r.opts.RetryBackoff, r.opts.MaxRetryBackoff)
		r.opts.Logger.Warn("runner: registration failed; retrying", "runner", r.opts.Name,
			"engine", r.opts.EngineAddr, "attempt", attempt, "retry_in", wait, "err", err)
		if !sleep(ctx, wait) {
			return ""
		}
	}
}

func (r *registrar) callRegister(ctx context.Context) (*realmv1.RegisterResponse, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
	defer cancel()
	return r.client.Register(callCtx, r.req)
}

// renew keeps the lease of id alive until ctx ends (false) or the engine
// says it does not know id (true: register again). A failed renewal is
// retried sooner than the next scheduled one, never later.
func (r *registrar) renew(ctx context.Context, id string) (reregister bool) {
	every := r.opts.Lease / 3
	wait := every
	failures := 0
	for {
		if !sleep(ctx, wait) {
			return false
		}
		callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
		_, err := r.client.Renew(callCtx, &realmv1.RenewRequest{RunnerId: id})
		cancel()
		switch {
		case err == nil:
			failures, wait = 0, every
		case ctx.Err() != nil:
			return false
		case lostRegistration(err):
			r.opts.Logger.Warn("runner: the engine no longer knows this runner; registering again",
				"runner", r.opts.Name, "runner_id", id, "err", err)
			return true
		default:
			failures++
			wait = min(every, backoff(failures, r.opts.RetryBackoff, r.opts.MaxRetryBackoff))
			r.opts.Logger.Warn("runner: lease renewal failed; retrying", "runner", r.opts.Name,
				"runner_id", id, "attempt", failures, "retry_in", wait, "err", err)
		}
	}
}

// callTimeout bounds one registry call: a third of the lease, at least 1s.
func (r *registrar) callTimeout() time.Duration {
	return max(r.opts.Lease/3, time.Second)
}

// lostRegistration reports whether a Renew error means the engine has no
// live registration under the id (its lease ended, or the registry was
// reset).
func lostRegistration(err error) bool {
	switch status.Code(err) {
	case codes.NotFound, codes.FailedPrecondition:
		return true
	}
	return false
}

// backoff is the wait before retry number attempt (1 for the first retry):
// base doubled each time, capped at maxWait, then drawn from its upper half
// so that runners restarted together do not retry in step.
func backoff(attempt int, base, maxWait time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// sleep waits for d or ctx's end; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
