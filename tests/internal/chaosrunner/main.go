// Command chaosrunner serves the handlers of the fault test's workflow
// (tests/replicas TestChaos). Each call is written down in Redis, not in
// the process, so what it did outlives a SIGKILL:
//
//   - chaos_fast and chaos_slow count their calls per run and step
//     (<key-prefix>:calls:<run>:<step>); chaos_slow takes 0.3–2 s.
//   - chaos_tidy, the finalizer, appends "start <pid> <unix ns>" and
//     "end <pid> <unix ns>" to <key-prefix>:tidy:<run>, so the test can
//     check that no two calls of one run's cleanup overlapped.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

type handlers struct {
	rc     *redis.Client
	prefix string
}

// effect is a handler that counts its call, waits up to slow (0: not at
// all; the call's end cuts the wait) and answers.
type effect struct {
	h    *handlers
	slow time.Duration
}

func (e effect) Execute(ctx context.Context, _ handler.Inputs, sc handler.StepContext) (handler.Result, error) {
	n, err := e.h.rc.Incr(ctx, fmt.Sprintf("%s:calls:%s:%s", e.h.prefix, sc.RunID, sc.Step)).Result()
	if err != nil {
		return handler.Result{}, err
	}
	if e.slow > 0 {
		select {
		case <-ctx.Done():
			return handler.Result{}, ctx.Err()
		case <-time.After(300*time.Millisecond + rand.N(e.slow)):
		}
	}
	return handler.Data(map[string]any{"step": sc.Step, "call": n}), nil
}

// tidy is the finalizer: its start and end are written down with this
// process's id and the time.
type tidy struct{ h *handlers }

func (t tidy) Execute(ctx context.Context, _ handler.Inputs, sc handler.StepContext) (handler.Result, error) {
	key := fmt.Sprintf("%s:tidy:%s", t.h.prefix, sc.RunID)
	mark := func(what string) error {
		// Written even when ctx has ended, so an end is never missing for
		// a process that lived.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return t.h.rc.RPush(wctx, key, fmt.Sprintf("%s %d %d", what, os.Getpid(), time.Now().UnixNano())).Err()
	}
	if err := mark("start"); err != nil {
		return handler.Result{}, err
	}
	defer func() { _ = mark("end") }()
	select {
	case <-ctx.Done():
		return handler.Result{}, ctx.Err()
	case <-time.After(100*time.Millisecond + rand.N(400*time.Millisecond)):
	}
	return handler.Data(map[string]any{"tidied": true}), nil
}

func main() {
	h := &handlers{}
	var redisURL string
	runner.Main(runner.Program{
		Name: "chaos-runner",
		Handlers: []runner.Registration{
			{Name: "chaos_fast", Handler: effect{h: h}},
			{Name: "chaos_slow", Handler: effect{h: h, slow: 1700 * time.Millisecond}},
			{Name: "chaos_tidy", Handler: tidy{h: h}},
		},
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&redisURL, "redis-url", "redis://127.0.0.1:6379", "Redis where the calls are written down")
			fs.StringVar(&h.prefix, "key-prefix", "chaos", "prefix of the keys written")
		},
		Setup: func(ctx context.Context, _ *runner.Flags) error {
			opt, err := redis.ParseURL(redisURL)
			if err != nil {
				return fmt.Errorf("--redis-url: %w", err)
			}
			h.rc = redis.NewClient(opt)
			return h.rc.Ping(ctx).Err()
		},
	})
}
