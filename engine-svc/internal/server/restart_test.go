package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/engine-svc/internal/server"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// redisProc is a redis-server of the test's own (the shared one must not be
// killed), persisted as production is: every write fsynced to the AOF.
type redisProc struct {
	t    testing.TB
	port int
	dir  string
	// launched is when start last ran redis-server; the AOF replay and the
	// first PING answer come after it.
	launched time.Time
	cmd      *exec.Cmd
	done     chan struct{}
}

func startRedisProc(t testing.TB) *redisProc {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found (scripts/test.sh installs it): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	p := &redisProc{t: t, port: port, dir: t.TempDir()}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *redisProc) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

// start runs redis-server on the same port and folder as before and waits
// until it answers (having replayed its AOF).
func (p *redisProc) start() {
	p.t.Helper()
	p.cmd = exec.Command("redis-server", "--port", strconv.Itoa(p.port), "--bind", "127.0.0.1",
		"--dir", p.dir, "--appendonly", "yes", "--appendfsync", "always", "--save", "")
	p.launched = time.Now()
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(done) }(p.cmd)
	p.done = done
	c := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("redis-server on %s not answering: %v", p.addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs redis-server (no shutdown, no final save) and waits for it.
func (p *redisProc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// TestEngineSurvivesRedisRestart starts runs from several writers, SIGKILLs
// Redis mid-load and restarts it on the same port and folder: every run
// whose start was acknowledged is there afterwards, calls in between fail
// with UNAVAILABLE / ENGINE_STORE_FAILED (not INTERNAL, not a hang),
// readiness goes NOT_SERVING and back to SERVING within 5s of Redis
// returning, and the same engine (no restart) serves again.
func TestEngineSurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	rp := startRedisProc(t)
	// Timeouts short enough that a call during the outage fails fast.
	rc := redis.NewClient(&redis.Options{Addr: rp.addr(), DialTimeout: 500 * time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = rc.Close() })
	st := store.NewRedis(rc, store.Options{Prefix: "realm", Buckets: 16})
	reg := registry.New(rc, "realm", nil, 0)
	eng := engine.New(engine.Options{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler)})

	gs := grpc.NewServer()
	realmv1.RegisterEngineServiceServer(gs, server.New(eng))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	const svc = "realm.v1.EngineService"
	hs.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		server.StoreWatch{Health: hs, Ping: st.Ping, Interval: time.Second, // engine-svc's default
			Logger: slog.New(slog.DiscardHandler), Services: []string{svc}}.Run(watchCtx)
	}()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopWatch()
		<-watched
		_ = conn.Close()
		gs.Stop()
		<-served
		eng.Close()
	})
	client := realmv1.NewEngineServiceClient(conn)
	hc := healthpb.NewHealthClient(conn)
	if _, err := client.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{
		Yaml: readFile(t, "testdata/triage.yaml"), Path: "workflow.yaml"}}); err != nil {
		t.Fatal(err)
	}

	// Readiness as a probe sees it, sampled every 20ms.
	var (
		mu         sync.Mutex
		notServing time.Time // first NOT_SERVING seen
		servingAt  time.Time // first SERVING after it
	)
	probeCtx, stopProbe := context.WithCancel(context.Background())
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for probeCtx.Err() == nil {
			c, cancel := context.WithTimeout(probeCtx, time.Second)
			resp, err := hc.Check(c, &healthpb.HealthCheckRequest{Service: svc})
			cancel()
			now := time.Now()
			mu.Lock()
			switch {
			case err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING && notServing.IsZero():
				notServing = now
			case err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING && !notServing.IsZero() && servingAt.IsZero():
				servingAt = now
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { stopProbe(); <-probed })

	// Writers start runs until told to stop, keeping every acknowledged id
	// and every error.
	type result struct {
		acked      []string
		errs       []error
		slowestErr time.Duration // the longest a failing call took
	}
	stopWriters := make(chan struct{})
	results := make([]result, 4)
	var wg sync.WaitGroup
	for w := range results {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stopWriters:
					return
				default:
				}
				c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				began := time.Now()
				resp, err := client.StartRun(c, &realmv1.StartRunRequest{WorkflowId: "triage",
					Params: params(t, map[string]any{"ticket": w*100000 + i})})
				took := time.Since(began)
				cancel()
				switch {
				case err != nil:
					results[w].errs = append(results[w].errs, err)
					results[w].slowestErr = max(results[w].slowestErr, took)
					time.Sleep(10 * time.Millisecond)
				case resp.GetReply().GetErrorCode() != "":
					results[w].errs = append(results[w].errs, fmt.Errorf("refused: %s %s", resp.GetReply().GetErrorCode(), resp.GetReply().GetContextHint()))
				default:
					results[w].acked = append(results[w].acked, resp.GetReply().GetRunId())
				}
			}
		})
	}

	time.Sleep(500 * time.Millisecond) // load before the kill
	killedAt := time.Now()
	rp.kill()
	// Stay down longer than a commit keeps trying (go-redis's own retries,
	// about 1.5s a call, then the store's settling of a commit that got no
	// answer, 2s), so calls fail rather than ride the outage out.
	time.Sleep(5 * time.Second)
	rp.start()
	backAt := time.Now()
	relaunchedAt := rp.launched
	// Keep writing after Redis is back, until readiness recovers (or 10s).
	for time.Since(backAt) < 10*time.Second {
		mu.Lock()
		recovered := !servingAt.IsZero()
		mu.Unlock()
		if recovered {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stopWriters)
	wg.Wait()

	mu.Lock()
	ns, sv := notServing, servingAt
	mu.Unlock()
	if ns.IsZero() {
		t.Fatal("readiness never went NOT_SERVING while Redis was down")
	}
	if sv.IsZero() {
		t.Fatal("readiness never came back to SERVING after Redis returned")
	}
	recovery := sv.Sub(relaunchedAt)
	t.Logf("NOT_SERVING %v after the kill; SERVING %v after redis-server was relaunched (it answered our own PING after %v)",
		ns.Sub(killedAt).Round(time.Millisecond), recovery.Round(time.Millisecond), backAt.Sub(relaunchedAt).Round(time.Millisecond))
	if recovery > 5*time.Second {
		t.Errorf("readiness took %v to recover, want within 5s", recovery)
	}

	var acked []string
	unavailable := 0
	var slowest time.Duration
	for _, r := range results {
		acked = append(acked, r.acked...)
		slowest = max(slowest, r.slowestErr)
		for _, err := range r.errs {
			st, ok := status.FromError(err)
			if !ok || st.Code() != codes.Unavailable {
				t.Errorf("call during the outage: %v, want gRPC UNAVAILABLE", err)
				continue
			}
			code, retryable, ok := errorDetail(st)
			switch {
			case !ok:
				// A call that never reached the engine (gRPC's own
				// UNAVAILABLE) carries no detail; ours always do.
				t.Errorf("UNAVAILABLE without an ErrorDetail: %v", err)
			case code != string(errcode.EngineStoreFailed) || !retryable:
				t.Errorf("outage error %s (retryable %v), want retryable %s: %v", code, retryable, errcode.EngineStoreFailed, err)
			case !strings.Contains(strings.ToLower(st.Message()), "retry"):
				t.Errorf("outage error gives no retry advice: %q", st.Message())
			default:
				unavailable++
			}
		}
	}
	t.Logf("%d runs acknowledged, %d calls refused UNAVAILABLE during the outage, the slowest after %v", len(acked), unavailable, slowest.Round(time.Millisecond))
	// Failing fast is the point: a caller waiting out the call's own
	// deadline cannot tell an outage from a slow engine.
	if slowest > 5*time.Second {
		t.Errorf("a call during the outage took %v to fail", slowest)
	}
	if unavailable == 0 {
		t.Error("no call failed during the outage: the kill did not land mid-load")
	}
	if len(acked) == 0 {
		t.Fatal("no run was acknowledged")
	}
	for _, id := range acked {
		resp, err := client.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: id})
		if err != nil {
			t.Errorf("acknowledged run %s: %v", id, err)
			continue
		}
		if ref := resp.GetRefusal(); ref != nil || resp.GetState() == nil {
			t.Errorf("acknowledged run %s lost after the restart: %s", id, ref.GetErrorCode())
		}
	}
	// The same engine takes new work without a restart.
	if r := start(t, &env{client: client}, "triage", map[string]any{"ticket": 1}); r.GetErrorCode() != "" {
		t.Errorf("start after recovery refused: %s", r.GetErrorCode())
	}
	if aof, _ := filepath.Glob(filepath.Join(rp.dir, "appendonly*")); len(aof) == 0 {
		if _, err := os.Stat(filepath.Join(rp.dir, "appendonlydir")); errors.Is(err, os.ErrNotExist) {
			t.Error("redis-server wrote no AOF: the test did not exercise persistence")
		}
	}
}

// errorDetail reads the realm ErrorDetail of a status.
func errorDetail(st *status.Status) (code string, retryable, ok bool) {
	for _, d := range st.Details() {
		if ed, isED := d.(*realmv1.ErrorDetail); isED {
			return ed.GetCode(), ed.GetRetryable(), true
		}
	}
	return "", false, false
}
