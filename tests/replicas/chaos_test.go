package replicas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

// make test runs the short fault test; make chaos the long one, set by
// the environment (flags would reach every package's test binary):
// REALM_CHAOS_RUNS (default 40; make chaos 200), REALM_CHAOS_KILLS, the
// SIGKILLs of each kind of process (default 2; make chaos 4), and
// REALM_CHAOS_SEED to replay a schedule (default: a new seed, printed).
func chaosSetting(t *testing.T, name string, def uint64) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

// chaosWorkflow: a webhook starts it, a model drafts a reply that a person
// confirms at a gate, two handler steps of different speeds run in
// parallel, and a finalizer cleans up however the run ended.
const chaosWorkflow = `id: chaos
name: Chaos
version: 1
trigger:
  type: webhook
  auth: { mode: none }
  dedup: { id_from: body.id, ttl_minutes: 10 }
  params_map: { ticket: body.ticket }
steps:
` + draftStep + `  fast:
    description: A quick effect.
    execution: auto
    handler: chaos_fast
    depends_on: [draft]
    idempotent: true
    timeout_seconds: 20
    retry: { max_attempts: 40, backoff: fixed, base_delay_ms: 500 }
  slow:
    description: A slow effect.
    execution: auto
    handler: chaos_slow
    depends_on: [draft]
    idempotent: true
    timeout_seconds: 20
    retry: { max_attempts: 40, backoff: fixed, base_delay_ms: 500 }
  tidy:
    description: Clean up however the run ended.
    execution: finalizer
    handler: chaos_tidy
    on_outcome: always
`

// chaosMaxDrives is the agent-svc replicas' shared drive limit.
const chaosMaxDrives = 3

// service is one started process of the stack that the test kills and
// starts again, on the same address with the same arguments.
type service struct {
	kind, name, addr string
	bin              string
	env              []string
	args             []string
	ready            func(*proc) error

	mu    sync.Mutex
	p     *proc
	kills []kill
}

type kill struct {
	pid int
	at  time.Time
}

func (s *service) start(t *testing.T) error {
	p, err := startEnv(t, s.name, s.bin, s.env, s.args...)
	if err != nil {
		return err
	}
	if err := s.ready(p); err != nil {
		return err
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return nil
}

// killAndRestart SIGKILLs the process, waits down (a random while, as a
// crashed pod's restart does), and starts it again.
func (s *service) killAndRestart(t *testing.T, down time.Duration) error {
	s.mu.Lock()
	p := s.p
	s.mu.Unlock()
	p.kill()
	s.mu.Lock()
	s.kills = append(s.kills, kill{pid: p.cmd.Process.Pid, at: time.Now()})
	s.mu.Unlock()
	time.Sleep(down)
	return s.start(t)
}

// listening waits until something accepts connections on addr, or p exits.
func listening(addr string) func(*proc) error {
	return func(p *proc) error { return awaitEngine(p, p.name, addr) }
}

// TestChaos is the durable-execution fault test (issue #17): two engine-svc
// replicas on Redis, two agent-svc replicas with a stub model, listen-svc
// and two handler runners serve webhook-started runs of chaosWorkflow while
// each kind of process is SIGKILLed and restarted at random moments. No
// operator command is given. Every run must complete within 120 s of the
// last kill with one recorded outcome per step, its cleanup delivered
// once at a time, no claim left, no drive still owed, and the drive limit
// never exceeded. The seed is printed; REALM_CHAOS_SEED replays a
// schedule.
func TestChaos(t *testing.T) {
	t.Parallel()
	seed := chaosSetting(t, "REALM_CHAOS_SEED", uint64(time.Now().UnixNano()))
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	runs, killsEach := int(chaosSetting(t, "REALM_CHAOS_RUNS", 40)), int(chaosSetting(t, "REALM_CHAOS_KILLS", 2))
	t.Logf("chaos seed %d: %d runs, %d kills of each kind (replay: REALM_CHAOS_SEED=%d REALM_CHAOS_RUNS=%d REALM_CHAOS_KILLS=%d)", seed, runs, killsEach, seed, runs, killsEach)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	url := redisURL()
	prefix := isolatedPrefix(t, url)
	rc := chaosRedis(t, url, prefix)
	bins := buildBinaries(t)
	listenBin, runnerBin := buildChaosBinaries(t)
	stub, modelCalls := chatStubWith(t, 600*time.Millisecond) // drives hold their slots a while

	engines := []*service{}
	for i := range 2 {
		addr := freeAddr(t)
		engines = append(engines, &service{kind: "engine-svc", name: fmt.Sprintf("engine-svc %d", i+1), addr: addr, bin: bins.engine, env: os.Environ(),
			args: []string{"--addr", addr, "--redis-url", url, "--redis-prefix", prefix, "--claim-window", "3s",
				"--sweep-interval", "500ms", "--shutdown-grace", "1s"}, ready: listening(addr)})
	}
	engineAddrs := engines[0].addr + "," + engines[1].addr
	runners := []*service{}
	for i := range 2 {
		addr := freeAddr(t)
		runners = append(runners, &service{kind: "runner", name: fmt.Sprintf("runner %d", i+1), addr: addr, bin: runnerBin, env: os.Environ(),
			args: []string{"--name", fmt.Sprintf("chaos-runner-%d", i+1), "--engine-addr", engineAddrs, "--listen", addr, "--lease", "2s",
				"--shutdown-timeout", "1s", "--redis-url", url, "--key-prefix", prefix + ":chaos"}, ready: listening(addr)})
	}
	agentEnv := append(os.Environ(), "OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+stub.URL)
	agents := []*service{}
	for i := range 2 {
		addr := freeAddr(t)
		agents = append(agents, &service{kind: "agent-svc", name: fmt.Sprintf("agent-svc %d", i+1), addr: addr, bin: bins.agent, env: agentEnv,
			args: []string{"--addr", addr, "--engine-addr", engineAddrs, "--redis-url", url, "--redis-prefix", prefix + ":agent",
				"--max-drives", strconv.Itoa(chaosMaxDrives), "--drive-lease", "1s", "--pickup-interval", "200ms", "--gate-poll", "300ms",
				"--shutdown-grace", "1s"}, ready: listening(addr)})
	}
	listenAddr := freeAddr(t)
	listen := &service{kind: "listen-svc", name: "listen-svc", addr: listenAddr, bin: listenBin, env: os.Environ(),
		args: []string{"--addr", listenAddr, "--engine-addr", engineAddrs, "--agent-addr", agents[0].addr, "--redis-url", url,
			"--provider", "openai", "--model", "gpt-test", "--refresh", "200ms"},
		ready: func(p *proc) error { return answersHealth(p, listenAddr) }}

	for _, s := range engines {
		if err := s.start(t); err != nil {
			t.Fatal(err)
		}
	}
	eng, conn, err := client.DialEngine(ctx, engineAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if r, err := eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(chaosWorkflow), Path: "chaos.yaml"}}); err != nil || !r.GetRegistered() {
		t.Fatalf("register: %v %v", err, r.GetReport().GetText())
	}
	for _, s := range append(append(append([]*service{}, runners...), agents...), listen) {
		if err := s.start(t); err != nil {
			t.Fatal(err)
		}
	}

	began := time.Now() // the stack is up: the schedule starts

	// The drive limit, sampled from the store all along.
	var maxHolders atomic.Int64
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		key := "{" + prefix + ":agent:drives}:holders"
		for sampling.Err() == nil {
			if n, err := rc.ZCard(sampling, key).Result(); err == nil && n > maxHolders.Load() {
				maxHolders.Store(n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// Deliveries, re-sent until accepted, as a webhook sender does.
	deliveryGap := 500 * time.Millisecond // on average: a few runs in flight at any kill
	var delivered sync.WaitGroup
	var redeliveries atomic.Int64
	gaps := make([]time.Duration, runs)
	for i := range gaps {
		gaps[i] = time.Duration(rng.Int64N(int64(2 * deliveryGap)))
	}
	deliveries := make(chan struct{})
	go func() {
		defer close(deliveries)
		for i := range runs {
			time.Sleep(gaps[i])
			delivered.Add(1)
			go func() {
				defer delivered.Done()
				redeliveries.Add(int64(deliver(ctx, t, listenAddr, fmt.Sprintf("%s-%d", prefix, i), i) - 1))
			}()
		}
	}()

	// A person answers each gate after a while.
	answering, stopAnswering := context.WithCancel(ctx)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		answerGates(answering, eng, rand.New(rand.NewPCG(seed+1, seed)))
	}()

	// The kills: each kind killsEach times, in a random order, spread over
	// the deliveries and a while after.
	var victims []*service
	for range killsEach {
		victims = append(victims, engines[rng.IntN(2)], agents[rng.IntN(2)], listen, runners[rng.IntN(2)])
	}
	rng.Shuffle(len(victims), func(i, j int) { victims[i], victims[j] = victims[j], victims[i] })
	span := time.Duration(runs)*deliveryGap + 5*time.Second
	every := span / time.Duration(len(victims))
	var killLog []string
	for _, v := range victims {
		time.Sleep(every/2 + time.Duration(rng.Int64N(int64(every))))
		down := 100*time.Millisecond + time.Duration(rng.Int64N(int64(1400*time.Millisecond)))
		killLog = append(killLog, fmt.Sprintf("%s at %s (down %s)", v.name, time.Since(began).Round(time.Millisecond), down.Round(time.Millisecond)))
		if err := v.killAndRestart(t, down); err != nil {
			t.Fatalf("restart %s: %v", v.name, err)
		}
	}
	lastKill := time.Now()
	t.Logf("kills (%d): %s", len(killLog), strings.Join(killLog, "; "))
	<-deliveries
	delivered.Wait()

	// Every run ends within 120 s of the last kill, with no operator.
	ids := runIDs(ctx, t, eng)
	if len(ids) != runs {
		t.Errorf("%d runs of %d deliveries: each delivery must start exactly one run", len(ids), runs)
	}
	phases := map[string]realmv1.RunPhase{}
	err = poll("every run to end", time.Until(lastKill.Add(120*time.Second)), func() bool {
		for _, id := range ids {
			if reply.Terminal(phases[id]) {
				continue
			}
			if st, err := eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: id}); err == nil {
				phases[id] = st.GetState().GetRunPhase()
			}
		}
		return !slices.ContainsFunc(ids, func(id string) bool { return !reply.Terminal(phases[id]) })
	})
	ended := time.Since(lastKill)
	stopAnswering()
	<-answered
	if err != nil {
		for _, id := range ids {
			if !reply.Terminal(phases[id]) {
				b := export(ctx, t, eng, id)
				t.Errorf("run %s is %v:\n%s", id, phases[id], tail(pretty(b["run"]), 3000))
			}
		}
		t.Fatal(err)
	}
	// Their cleanup is delivered (a dead drainer's lease, 30 s, runs out
	// first).
	owing := slices.Clone(ids)
	_ = poll("every run's cleanup", 90*time.Second, func() bool {
		owing = slices.DeleteFunc(owing, func(id string) bool {
			run, _ := export(ctx, t, eng, id)["run"].(map[string]any)
			f, _ := run["finalizer_ledger"].(map[string]any)["tidy"].(map[string]any)
			return f["status"] == "completed"
		})
		return len(owing) == 0
	})
	if len(owing) > 0 {
		run, _ := export(ctx, t, eng, owing[0])["run"].(map[string]any)
		t.Errorf("cleanup not delivered for %d run(s): %v; the first:\n%s", len(owing), owing, tail(pretty(run), 6000))
	}
	stopSampling()
	<-sampled

	killed := map[int]time.Time{}
	for _, s := range runners {
		for _, k := range s.kills {
			killed[k.pid] = k.at
		}
	}
	var calls, reruns int64
	faults := map[string]int{} // what the record says went wrong, and how often
	for _, id := range ids {
		b := export(ctx, t, eng, id)
		run, _ := b["run"].(map[string]any)
		if phases[id] != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Errorf("run %s ended %v, want completed:\n%s", id, phases[id], tail(pretty(run), 3000))
		}
		done := map[string]int{}
		evidence, _ := run["evidence"].([]any)
		for _, raw := range evidence {
			e, _ := raw.(map[string]any)
			step, _ := e["step_id"].(string)
			switch {
			case e["status"] == "success" && e["kind"] == nil:
				done[step]++
			case e["kind"] != nil:
				faults[fmt.Sprint(e["kind"])]++
			default:
				faults[faultWords(e)]++
			}
		}
		for _, step := range []string{"draft", "fast", "slow"} {
			if done[step] != 1 {
				t.Errorf("run %s: %d recorded outcomes of %s, want 1", id, done[step], step)
			}
		}
		if c, _ := run["claims"].(map[string]any); len(c) > 0 {
			t.Errorf("run %s: claims left: %v", id, c)
		}
		if p, _ := run["in_progress_steps"].([]any); len(p) > 0 {
			t.Errorf("run %s: steps left in progress: %v", id, p)
		}
		for _, step := range []string{"fast", "slow"} {
			n, _ := rc.Get(ctx, fmt.Sprintf("%s:chaos:calls:%s:%s", prefix, id, step)).Int64()
			calls += n
			reruns += max(0, n-1)
		}
		checkCleanupOverlap(ctx, t, rc, prefix, id, killed)
	}
	if n := maxHolders.Load(); n > chaosMaxDrives {
		t.Errorf("the drive limit was exceeded: %d slots held at once, limit %d", n, chaosMaxDrives)
	}
	if err := poll("no drive to be owed", 10*time.Second, func() bool {
		n, err := rc.ZCard(ctx, "{"+prefix+":agent:book}:wanted").Result()
		return err == nil && n == 0
	}); err != nil {
		t.Error(err)
	}
	t.Logf("what the records say went wrong on the way: %v", faults)
	t.Logf("chaos seed %d: %d runs completed %s after the last of %d kills; wall %s; handler calls %d for %d steps (%d again after a fault); model requests %d; re-deliveries %d; most drive slots held at once %d of %d",
		seed, len(ids), ended.Round(time.Millisecond), len(victims), time.Since(began).Round(time.Second), calls, 2*len(ids), reruns,
		modelCalls.Load(), redeliveries.Load(), maxHolders.Load(), chaosMaxDrives)
}

// buildChaosBinaries builds listen-svc and the fault test's runner.
func buildChaosBinaries(t *testing.T) (listen, runner string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(goTool(), "build", "-o", dir+string(os.PathSeparator), "./listen-svc/cmd/listen-svc", "./tests/internal/chaosrunner")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "listen-svc"), filepath.Join(dir, "chaosrunner")
}

// chaosRedis is a client of the test's Redis; the agent-svc keys ({prefix…})
// are deleted with the rest when the test ends.
func chaosRedis(t *testing.T, url, prefix string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() {
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		keys, _ := rc.Keys(ctx, "{"+prefix+"*").Result()
		if len(keys) > 0 {
			rc.Del(ctx, keys...)
		}
	})
	return rc
}

// deliver posts event i to listen-svc until it is accepted (202) or
// answered as already handed off (200), and returns how many posts it took.
func deliver(ctx context.Context, t *testing.T, addr, id string, i int) int {
	body, _ := json.Marshal(map[string]any{"id": id, "ticket": i})
	hc := &http.Client{Timeout: 10 * time.Second}
	for n := 1; ; n++ {
		resp, err := hc.Post("http://"+addr+"/chaos", "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK {
				return n
			}
		}
		select {
		case <-ctx.Done():
			t.Errorf("delivery %s never accepted: %v", id, err)
			return n
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// answerGates answers every open gate of the chaos workflow "send", each
// after a random delay, until ctx ends.
func answerGates(ctx context.Context, eng realmv1.EngineServiceClient, rng *rand.Rand) {
	due := map[string]time.Time{}
	for ctx.Err() == nil {
		resp, err := eng.ListRuns(ctx, &realmv1.ListRunsRequest{WorkflowId: "chaos", Phase: realmv1.RunPhase_RUN_PHASE_GATE_WAITING, Limit: 1000})
		if err == nil {
			for _, r := range resp.GetRuns() {
				id := r.GetRunId()
				at, ok := due[id]
				if !ok {
					due[id] = time.Now().Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
					continue
				}
				if time.Now().Before(at) {
					continue
				}
				st, err := eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: id})
				if g := st.GetState().GetPendingGate(); err == nil && g != nil {
					_, _ = eng.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{RunId: id, GateId: g.GetGateId(), Choice: "send"})
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// runIDs lists the chaos workflow's runs.
func runIDs(ctx context.Context, t *testing.T, eng realmv1.EngineServiceClient) []string {
	var ids []string
	token := ""
	for {
		resp, err := eng.ListRuns(ctx, &realmv1.ListRunsRequest{WorkflowId: "chaos", Limit: 1000, PageToken: token})
		if err != nil {
			t.Fatalf("list runs: %v", err)
		}
		for _, r := range resp.GetRuns() {
			ids = append(ids, r.GetRunId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			return ids
		}
	}
}

// checkCleanupOverlap fails the test if two calls of run id's finalizer
// ran at once. A call whose runner was killed ended at the kill.
func checkCleanupOverlap(ctx context.Context, t *testing.T, rc *redis.Client, prefix, id string, killed map[int]time.Time) {
	t.Helper()
	marks, err := rc.LRange(ctx, fmt.Sprintf("%s:chaos:tidy:%s", prefix, id), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ from, to time.Time }
	open := map[int]time.Time{}
	var spans []span
	for _, m := range marks {
		var what string
		var pid int
		var ns int64
		if _, err := fmt.Sscanf(m, "%s %d %d", &what, &pid, &ns); err != nil {
			t.Fatalf("mark %q: %v", m, err)
		}
		at := time.Unix(0, ns)
		if what == "start" {
			open[pid] = at
			continue
		}
		spans = append(spans, span{open[pid], at})
		delete(open, pid)
	}
	for pid, from := range open {
		to, ok := killed[pid]
		if !ok {
			t.Errorf("run %s: a cleanup call of runner pid %d never ended, and that runner was not killed", id, pid)
			continue
		}
		spans = append(spans, span{from, to})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	for i := 1; i < len(spans); i++ {
		if spans[i].from.Before(spans[i-1].to) {
			t.Errorf("run %s: two cleanup calls ran at once: %v–%v and %v–%v", id, spans[i-1].from, spans[i-1].to, spans[i].from, spans[i].to)
		}
	}
}

// faultWords is a failed attempt's error, without the ids and addresses
// that make each one differ.
func faultWords(e map[string]any) string {
	msg := fmt.Sprint(e["status"], ": ", e["error"])
	for _, f := range strings.Fields(msg) {
		if strings.ContainsAny(f, "0123456789") {
			msg = strings.Replace(msg, f, "…", 1)
		}
	}
	return msg
}
