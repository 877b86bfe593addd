// Package replicas proves issue 10's "several replicas, on one machine":
// two engine-svc processes on one real Redis, mcp-svc spreading calls over
// both, one engine killed (SIGKILL) and restarted while runs are driven
// through MCP.
package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/peer"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

const (
	totalRuns = 200
	workers   = 16
	// claimWindow replaces the spec's 15-minute minimum (engine-svc's
	// testing-only --claim-window), so the dead engine's claims go stale
	// within the test.
	claimWindow = 3 * time.Second
	// killAfter is how many runs start before the kill is armed.
	killAfter = 60
)

// The workflow: three agent steps around one auto step served by a handler
// runner in this process, so every run holds a claim while `work` runs.
const workflowYAML = `id: replicas
name: Replicas
description: Agent steps around one auto step served by a handler runner.
version: 1
params_schema:
  type: object
  required: [n]
  properties:
    n: { type: number }
steps:
  intake:
    description: Say what to work on.
    execution: agent
    input_schema:
      type: object
      required: [topic]
      properties:
        topic: { type: string, minLength: 1 }
  work:
    description: The runner does the work.
    execution: auto
    handler: replicas_work
    depends_on: [intake]
    input_map:
      topic: intake.topic
    timeout_seconds: 60
  review:
    description: Review the work.
    execution: agent
    depends_on: [work]
    input_schema:
      type: object
      required: [verdict]
      properties:
        verdict: { type: string, enum: [good, bad] }
  close:
    description: Close the run.
    execution: agent
    depends_on: [review]
    input_schema:
      type: object
      required: [note]
      properties:
        note: { type: string, minLength: 1 }
`

var stepNames = []string{"intake", "work", "review", "close"}

// work is the handler: once armed, each call waits until released (or
// until its caller goes away), so the engine that dispatched it holds the
// step's claim while it waits. Calls cut off by their engine's death are
// remembered by run.
type work struct {
	armed   atomic.Bool
	waiting atomic.Int64
	done    atomic.Int64
	mu      sync.Mutex
	release chan struct{}   // closed to let the waiting calls go; a new one per round
	peers   map[string]int  // waiting calls by the engine connection they came on
	cutOff  map[string]bool // runs whose call was cancelled by a dead caller
}

func newWork() *work {
	return &work{release: make(chan struct{}), peers: map[string]int{}, cutOff: map[string]bool{}}
}

func (w *work) Execute(ctx context.Context, in handler.Inputs, sc handler.StepContext) (handler.Result, error) {
	if w.armed.Load() {
		from := "?"
		if p, ok := peer.FromContext(ctx); ok {
			from = p.Addr.String()
		}
		w.mu.Lock()
		release := w.release
		w.peers[from]++
		w.mu.Unlock()
		w.waiting.Add(1)
		defer func() {
			w.waiting.Add(-1)
			w.mu.Lock()
			if w.peers[from]--; w.peers[from] == 0 {
				delete(w.peers, from)
			}
			w.mu.Unlock()
		}()
		select {
		case <-release:
		case <-ctx.Done():
			w.mu.Lock()
			w.cutOff[sc.RunID] = true
			w.mu.Unlock()
			return handler.Result{}, ctx.Err()
		}
	}
	w.done.Add(1)
	return handler.Data(map[string]any{"done": in.Params["topic"]}), nil
}

// waitingPeers counts the engine connections the waiting calls came on.
func (w *work) waitingPeers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.peers)
}

// open lets every waiting call go, and those of later rounds.
func (w *work) open() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.release:
	default:
		close(w.release)
	}
}

// nextRound lets the waiting calls go and makes later ones wait again.
func (w *work) nextRound() {
	w.open()
	w.mu.Lock()
	w.release = make(chan struct{})
	w.mu.Unlock()
}

func (w *work) cutOffRuns() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.cutOff))
	for k := range w.cutOff {
		out[k] = true
	}
	return out
}

// Two engine-svc processes on one Redis behind one mcp-svc: 200 runs
// driven through MCP while one engine is killed and restarted; every run
// completes, no step is recorded twice, and the claims the dead engine
// held go stale by their deadline and are recovered with realm run reclaim.
func TestRunsSurviveAKilledEngineReplica(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	bins := buildBinaries(t)
	url := redisURL()
	prefix := isolatedPrefix(t, url)
	addrA, addrB := freeAddr(t), freeAddr(t)
	engineA, err := startEngine(bins, "engine-svc A", addrA, url, prefix, claimWindow, t)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startEngine(bins, "engine-svc B", addrB, url, prefix, claimWindow, t); err != nil {
		t.Fatal(err)
	}
	engines := addrA + "," + addrB
	mcpURL := startMCP(t, bins, engines)

	eng, conn, err := client.DialEngine(ctx, engines)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg, err := eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(workflowYAML), Path: "replicas.yaml"}})
	if err != nil || !reg.GetRegistered() {
		t.Fatalf("register: %v %s", err, reg.GetReport().GetText())
	}

	// The runner registers through B, the engine that stays up; the
	// registry is in Redis, so A dispatches to it too.
	w := newWork()
	defer w.open()
	defer serveHandler(t, ctx, conn, addrB, "replicas-runner", runner.Registration{Name: "replicas_work", Handler: w})()

	mc := mcp.NewClient(&mcp.Implementation{Name: "replicas-test", Version: "0"}, nil)
	session, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect to mcp-svc: %v", err)
	}
	defer session.Close()
	d := &driver{t: t, s: session}

	// Drive the runs with a bounded pool of workers.
	var started atomic.Int64
	ids := make([]string, totalRuns)
	var stuckMu sync.Mutex
	var stuck []string
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				started.Add(1)
				id, end := d.drive(ctx, i)
				ids[i] = id
				if end == endStale {
					stuckMu.Lock()
					stuck = append(stuck, id)
					stuckMu.Unlock()
				}
			}
		}()
	}

	// The kill: once enough runs have gone through, arm the handler so
	// that every worker ends up waiting in `work`, kill engine A while its
	// dispatches wait, let B's finish, and bring A back on its port.
	killed := make(chan error, 1)
	go func() {
		err := d.killAndRestart(ctx, &started, w, engineA, func() error {
			_, err := startEngine(bins, "engine-svc A (restarted)", addrA, url, prefix, claimWindow, t)
			return err
		})
		if err != nil {
			w.open()
			cancel()
		}
		killed <- err
	}()

	for i := range totalRuns {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		return
	}

	// The dead engine's claims: each goes stale at its deadline and is
	// freed by an operator with realm run reclaim, then advance_run runs the
	// step again on a live engine and the client finishes the run.
	cut := w.cutOffRuns()
	if len(stuck) == 0 {
		t.Fatalf("no run was left with a stale claim, though %d handler calls of the killed engine were cut off", len(cut))
	}
	reclaimed := map[string]bool{}
	for _, id := range stuck {
		d.checkClaimDeadline(ctx, eng, id)
		// The listing asks the restarted engine alone: it is back, serving
		// the shared store.
		list := realm(t, bins, addrA, "run", "reclaim", id)
		if !strings.Contains(list, "work: claim_stale") {
			t.Errorf("run %s: realm run reclaim does not list work's claim as stale:\n%s", id, list)
		}
		out := realm(t, bins, engines, "run", "reclaim", id, "--step", "work", "--force")
		if !strings.Contains(out, "Reclaimed 'work' (was claim_stale)") {
			t.Errorf("run %s: reclaim did not free a stale claim:\n%s", id, out)
		}
		reclaimed[id] = true
		r := d.call(ctx, "advance_run", map[string]any{"run_id": id})
		if r == nil {
			continue
		}
		if end := d.follow(ctx, id, r); end != endDone {
			t.Errorf("run %s did not finish after reclaim and advance_run (%v)", id, end)
		}
	}
	if got := d.retries.Load(); got < int64(len(cut)) {
		t.Errorf("%d calls were retried, but the kill cut off %d of them", got, len(cut))
	}
	for id := range cut {
		if !reclaimed[id] {
			t.Errorf("run %s: the killed engine's handler call was cut off, but the run was not left with a stale claim to reclaim", id)
		}
	}

	// Every run completed, and its evidence records each step once.
	seen := map[string]bool{}
	for i, id := range ids {
		if id == "" {
			t.Errorf("run %d was never started", i)
			continue
		}
		if seen[id] {
			t.Errorf("runs %d and another got the same id %s", i, id)
		}
		seen[id] = true
		s := d.call(ctx, "get_run_state", map[string]any{"run_id": id, "include_steps": true})
		if s == nil {
			continue
		}
		if s["run_phase"] != "completed" || s["terminal_state"] != true {
			t.Errorf("run %s (%d) ended %v: %s", id, i, s["run_phase"], pretty(s))
			continue
		}
		checkEvidence(ctx, t, eng, id, reclaimed[id])
	}
	t.Logf("%d runs completed; %d handler calls cut off by the kill, %d runs reclaimed; %d calls retried after an engine failure, %d of them refused on retry (already done)",
		len(seen), len(cut), len(reclaimed), d.retries.Load(), d.refusedRetries.Load())
}

// checkEvidence fails the test unless the run's exported evidence records
// each step's completion exactly once; a reclaimed run also carries one
// reclaim entry for work.
func checkEvidence(ctx context.Context, t *testing.T, eng realmv1.EngineServiceClient, id string, wasReclaimed bool) {
	t.Helper()
	b := export(ctx, t, eng, id)
	run, _ := b["run"].(map[string]any)
	entries, ok := run["evidence"].([]any)
	if !ok {
		t.Fatalf("run %s: export has no evidence list: %s", id, tail(pretty(b), 2000))
	}
	done := map[string]int{}
	reclaims := 0
	for _, raw := range entries {
		e, _ := raw.(map[string]any)
		step, _ := e["step_id"].(string)
		switch {
		case e["kind"] == "reclaim":
			reclaims++
		case e["status"] == "success":
			done[step]++
		}
	}
	for _, s := range stepNames {
		if done[s] != 1 {
			t.Errorf("run %s: step %s recorded %d times, want once:\n%s", id, s, done[s], tail(pretty(entries), 3000))
		}
	}
	want := 0
	if wasReclaimed {
		want = 1
	}
	if reclaims != want {
		t.Errorf("run %s: %d reclaim entries, want %d", id, reclaims, want)
	}
}

func export(ctx context.Context, t *testing.T, eng realmv1.EngineServiceClient, id string) map[string]any {
	t.Helper()
	resp, err := eng.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: id})
	if err != nil {
		t.Fatalf("export %s: %v", id, err)
	}
	var b map[string]any
	if err := json.Unmarshal(resp.GetBundle(), &b); err != nil {
		t.Fatalf("export %s: %v", id, err)
	}
	return b
}

// checkClaimDeadline fails the test unless the stuck run's claim on work
// carries the deadline the engine's rule gives: its start plus the claim
// window.
func (d *driver) checkClaimDeadline(ctx context.Context, eng realmv1.EngineServiceClient, id string) {
	d.t.Helper()
	b := export(ctx, d.t, eng, id)
	run, _ := b["run"].(map[string]any)
	claims, _ := run["claims"].(map[string]any)
	c, _ := claims["work"].(map[string]any)
	since, _ := c["since"].(string)
	deadline, _ := c["deadline"].(string)
	s, err1 := time.Parse(time.RFC3339Nano, since)
	dl, err2 := time.Parse(time.RFC3339Nano, deadline)
	if err1 != nil || err2 != nil {
		d.t.Errorf("run %s: work's claim has no since/deadline: %v", id, c)
		return
	}
	if got := dl.Sub(s); got != claimWindow {
		d.t.Errorf("run %s: claim deadline is %s after it was taken, want %s", id, got, claimWindow)
	}
	if !time.Now().After(dl) {
		d.t.Errorf("run %s: reported stale before its deadline %s", id, deadline)
	}
}

// killAndRestart waits until killAfter runs have started, arms the
// handler so that every worker ends up waiting in work, kills engine A
// (SIGKILL) while its dispatches wait, lets B's finish and brings A back
// on its port.
func (d *driver) killAndRestart(ctx context.Context, started *atomic.Int64, w *work, a *proc, restart func() error) error {
	for started.Load() < killAfter {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Both engines must have calls waiting, or the kill may cut nothing
	// (every waiting call came through the survivor): let a one-sided
	// round go and wait again.
	for round := 1; ; round++ {
		w.armed.Store(true)
		if err := poll("every worker to wait in the handler", 20*time.Second, func() bool { return w.waiting.Load() >= workers }); err != nil {
			return err
		}
		if n := w.waitingPeers(); n >= 2 {
			d.t.Logf("kill in round %d: the waiting handler calls came on %d engine connections", round, n)
			break
		}
		if round == 10 {
			return fmt.Errorf("in %d rounds every waiting handler call came through one engine", round)
		}
		w.armed.Store(false)
		w.nextRound()
		if err := poll("the released calls to finish", 20*time.Second, func() bool { return w.waiting.Load() == 0 }); err != nil {
			return err
		}
	}
	a.kill()
	// The dead engine's calls to the runner are cut off as its
	// connections close.
	if err := poll("the dead engine's handler calls to be cut off", 10*time.Second, func() bool { return len(w.cutOffRuns()) > 0 }); err != nil {
		return err
	}
	w.armed.Store(false)
	w.open()
	return restart()
}

func pretty(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// end is how driving a run stopped.
type end int

const (
	endDone  end = iota // the run is over
	endStale            // a claim went stale: an operator must reclaim it
)

func (e end) String() string { return [...]string{"done", "claim stale"}[e] }

// driver is an MCP client that drives runs as an assistant would: it
// follows next_actions, retries a call that failed because its engine
// died, and re-reads the run after a refusal.
type driver struct {
	t              *testing.T
	s              *mcp.ClientSession
	retries        atomic.Int64
	refusedRetries atomic.Int64
}

// drive starts run i (keyed, so a retried start is the same run) and
// follows it until it ends or waits on a stale claim.
func (d *driver) drive(ctx context.Context, i int) (string, end) {
	r := d.call(ctx, "start_run", map[string]any{"workflow_id": "replicas", "params": map[string]any{"n": i},
		"idempotency_key": fmt.Sprintf("replicas-%d", i)})
	id, _ := r["run_id"].(string)
	if id == "" {
		d.t.Errorf("start_run %d: no run id: %s", i, pretty(r))
		return "", endDone
	}
	return id, d.follow(ctx, id, r)
}

// follow does what each reply's next_actions says. When nothing is
// offered it re-reads the run: over, stale (hand to an operator), or in
// flight elsewhere (wait and read again).
func (d *driver) follow(ctx context.Context, id string, r map[string]any) end {
	for i := 0; i < 400; i++ {
		if r == nil {
			return endDone // the call failed the test
		}
		if ctx.Err() != nil {
			d.t.Errorf("run %s: %v", id, ctx.Err())
			return endDone
		}
		if r["status"] == "error" || r["status"] == "blocked" {
			// A refusal (a retried step the dead engine had recorded, say):
			// read where the run stands.
			r = d.call(ctx, "get_run_state", map[string]any{"run_id": id})
		}
		actions, _ := r["next_actions"].([]any)
		if len(actions) == 0 {
			s := d.call(ctx, "get_run_state", map[string]any{"run_id": id})
			switch {
			case s == nil:
				return endDone
			case s["terminal_state"] == true:
				return endDone
			case s["next_actions_status"] == "claim_stale":
				return endStale
			}
			if next, _ := s["next_actions"].([]any); len(next) == 0 {
				time.Sleep(100 * time.Millisecond) // in flight elsewhere
			}
			r = s
			continue
		}
		a, _ := actions[0].(map[string]any)
		in, _ := a["instruction"].(map[string]any)
		tool, _ := in["tool"].(string)
		args, _ := in["call_with"].(map[string]any)
		if tool == "execute_step" {
			args["params"] = answerFor(a["input_schema"])
		}
		r = d.call(ctx, tool, args)
	}
	d.t.Errorf("run %s did not end after 400 calls; last reply: %s\nstate: %s", id, pretty(r), pretty(d.call(ctx, "get_run_state", map[string]any{"run_id": id})))
	return endDone
}

// call calls a tool and decodes its JSON reply (nil, the test failed,
// when it cannot). A tool error (an engine
// that died under the call, or is not reachable yet) is retried after a
// short wait, as an assistant would; a retry that is refused is counted.
func (d *driver) call(ctx context.Context, tool string, args map[string]any) map[string]any {
	for attempt := 0; ; attempt++ {
		res, err := d.s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			d.t.Errorf("%s: MCP call failed: %v", tool, err)
			return nil
		}
		text := ""
		if len(res.Content) == 1 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		if res.IsError {
			if attempt >= 100 || ctx.Err() != nil {
				d.t.Errorf("%s: still failing after %d attempts: %s", tool, attempt+1, text)
				return nil
			}
			d.retries.Add(1)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			d.t.Errorf("%s: reply is not a JSON object: %v\n%s", tool, err, text)
			return nil
		}
		if attempt > 0 && m["status"] != "ok" {
			d.refusedRetries.Add(1)
		}
		return m
	}
}

// answerFor makes an answer that fits a schema: an enum's first value, a
// short text, one item per list.
func answerFor(schema any) any {
	s, _ := schema.(map[string]any)
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch s["type"] {
	case "number", "integer":
		return 1.0
	case "boolean":
		return true
	case "array":
		return []any{answerFor(s["items"])}
	case "object":
		props, _ := s["properties"].(map[string]any)
		out := map[string]any{}
		for name, p := range props {
			out[name] = answerFor(p)
		}
		return out
	}
	return "An answer."
}
