package server_test

// Health findings and next_actions_status, each produced by a real scenario
// over gRPC (seed 001 "Run state and health findings"). Where the seed
// prints an example, the finding is compared with the example's JSON, with
// this run's ids and times put in place of the seed's; the numbers that
// depend on the wall clock (idle_ms, overdue_ms) are checked by range.
// The findings only old versions of Realm wrote records for are produced
// from old-version record fixtures (testdata/health_fixtures) written into
// the store directly.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// --- helpers ---------------------------------------------------------------

// registerFile registers a testdata workflow and fails on a refusal.
func registerFile(t *testing.T, e *env, name string) {
	t.Helper()
	if r := e.register(t, readFile(t, "testdata/"+name)); !r.GetRegistered() {
		t.Fatalf("register %s: %s", name, r.GetReport().GetText())
	}
}

// findings is get_run_state's run_health, nil when absent.
func findings(s *realmv1.RunState) []map[string]any {
	list, _ := extra(s)["run_health"].([]any)
	out := make([]map[string]any, 0, len(list))
	for _, f := range list {
		out = append(out, f.(map[string]any))
	}
	return out
}

func kinds(fs []map[string]any) []string {
	var out []string
	for _, f := range fs {
		k := fmt.Sprint(f["kind"])
		if s, ok := f["step"]; ok {
			k += "[" + fmt.Sprint(s) + "]"
		}
		out = append(out, k)
	}
	return out
}

// finding returns the run's one finding of a kind (on a step, when step is
// not empty), failing the test when there is none.
func finding(t *testing.T, s *realmv1.RunState, kind, step string) map[string]any {
	t.Helper()
	for _, f := range findings(s) {
		if f["kind"] == kind && (step == "" || f["step"] == step) {
			return f
		}
	}
	t.Fatalf("no %s finding (step %q) in run_health; findings: %v", kind, step, kinds(findings(s)))
	return nil
}

// noFinding fails when the run has a finding of kind.
func noFinding(t *testing.T, s *realmv1.RunState, kind string) {
	t.Helper()
	for _, f := range findings(s) {
		if f["kind"] == kind {
			t.Errorf("unexpected %s finding: %v", kind, f)
		}
	}
}

// golden compares a finding with the seed's example. subs maps each of the
// seed's ids and times to this run's; masked are dotted paths whose values
// the wall clock decides — they must be present, and are compared by the
// caller.
func golden(t *testing.T, label string, got map[string]any, seed string, subs map[string]string, masked ...string) {
	t.Helper()
	for from, to := range subs {
		seed = strings.ReplaceAll(seed, from, to)
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(seed), &want); err != nil {
		t.Fatalf("%s: the seed example does not parse: %v", label, err)
	}
	gotCopy := cloneJSON(t, got)
	for _, path := range masked {
		if !setPath(gotCopy, path) {
			t.Errorf("%s: field %s is missing from the finding", label, path)
		}
		setPath(want, path)
	}
	if !reflect.DeepEqual(gotCopy, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("%s differs from the seed's example:\n got: %s\nwant: %s", label, g, w)
	}
}

func cloneJSON(t *testing.T, v map[string]any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// setPath replaces the value at a dotted path with a mask, reporting
// whether it was there.
func setPath(m map[string]any, path string) bool {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			return false
		}
		m = next
	}
	last := parts[len(parts)-1]
	if _, ok := m[last]; !ok {
		return false
	}
	m[last] = "<masked>"
	return true
}

func num(v any) int64 { f, _ := v.(float64); return int64(f) }

// loadDoc reads the run document as the store holds it.
func loadDoc(t *testing.T, e *env, run string) *record.Run {
	t.Helper()
	snap, err := e.st.LoadRun(ctx(t), run)
	if err != nil {
		t.Fatal(err)
	}
	var r record.Run
	if err := json.Unmarshal(snap.Doc, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func inspectText(t *testing.T, e *env, run string) string {
	t.Helper()
	resp, err := e.client.InspectRun(ctx(t), &realmv1.InspectRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetText()
}

// healthBlock is the `Run Health` block of inspect's text, "" when absent.
func healthBlock(text string) string {
	i := strings.Index(text, "Run Health (")
	if i < 0 {
		return ""
	}
	lines := strings.SplitAfter(text[i:], "\n")
	out := lines[0]
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "  ") {
			break
		}
		out += l
	}
	return out
}

// wantLabel checks the run's labels on `realm run list --stuck` (the
// seed's lines for the same runs).
func wantLabel(t *testing.T, e *env, run, want string) {
	t.Helper()
	got, ok := stuckList(t, e, 24*time.Hour)[run]
	if !ok || got != want {
		t.Errorf("list --stuck: listed %v with labels %q, want %q", ok, got, want)
	}
}

func wantStatus(t *testing.T, s *realmv1.RunState, want string) {
	t.Helper()
	if got := s.GetNextActionsStatus(); got != want {
		t.Errorf("next_actions_status = %q, want %q (findings %v, next_actions %v)", got, want, kinds(findings(s)), actionTools(s))
	}
}

func actionTools(s *realmv1.RunState) []string {
	var out []string
	for _, a := range s.GetNextActions() {
		out = append(out, a.GetInstruction().GetTool())
	}
	return out
}

// hangs hosts handlers whose holder never finishes while the test runs: the
// process holding the step is as good as dead. Cleanup lets them return and
// waits for the calls they blocked.
type hangs struct {
	release chan struct{}
	once    sync.Once
	calls   sync.WaitGroup
}

func hangingRunner(t *testing.T, e *env, names ...string) *hangs {
	t.Helper()
	h := &hangs{release: make(chan struct{})}
	handlers := map[string]handlerFunc{}
	for _, n := range names {
		handlers[n] = func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			select {
			case <-h.release:
			case <-ctx.Done():
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		}
	}
	startRunner(t, e, handlers)
	t.Cleanup(func() {
		h.once.Do(func() { close(h.release) })
		h.calls.Wait()
	})
	return h
}

// go runs a call that blocks on a hanging handler, in the background.
func (h *hangs) goCall(call func()) {
	h.calls.Add(1)
	go func() {
		defer h.calls.Done()
		call()
	}()
}

// startHung starts a run of wf in the background and returns its id once
// step is in progress (its handler hangs).
func (h *hangs) startHung(t *testing.T, e *env, wf, stepName string) string {
	t.Helper()
	h.goCall(func() {
		_, _ = e.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: wf, Params: params(t, nil)})
	})
	for range 500 {
		list, _ := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: wf})
		if len(list.GetRuns()) == 1 {
			run := list.GetRuns()[0].GetRunId()
			if slices.Contains(loadDoc(t, e, run).InProgressSteps, stepName) {
				return run
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no run of %s with %s in progress", wf, stepName)
	return ""
}

// openGateOn calls an agent step that opens a gate and returns the gate.
func openGateOn(t *testing.T, e *env, run, stepName string) *realmv1.Gate {
	t.Helper()
	r := step(t, e, run, stepName, map[string]any{"plan": "go ahead"})
	if r.GetGate().GetGateId() == "" {
		t.Fatalf("%s opened no gate: %v", stepName, r)
	}
	return r.GetGate()
}

// commitFixture writes an old-version run document (and evidence entries)
// into the store, with {{RUN_ID}}, {{T0}} and {{GATE_ID}} filled in.
func commitFixture(t *testing.T, e *env, doc string, entries ...string) (run, gate string) {
	t.Helper()
	run, gate = e.st.NewRunID(""), uuid.NewString()
	fill := func(name string) []byte {
		s := string(readFile(t, "testdata/health_fixtures/"+name))
		s = strings.NewReplacer("{{RUN_ID}}", run, "{{T0}}", record.FormatTime(e.clock.Now()), "{{GATE_ID}}", gate).Replace(s)
		return []byte(s)
	}
	var r record.Run
	b := fill(doc)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("fixture %s: %v", doc, err)
	}
	c := &store.Change{RunID: run, ExpectVersion: -1, NewVersion: r.Version, Doc: b}
	for _, en := range entries {
		c.Evidence = append(c.Evidence, fill(en))
	}
	if err := e.st.CommitRun(ctx(t), c); err != nil {
		t.Fatal(err)
	}
	return run, gate
}

// --- findings about open runs ----------------------------------------------

func TestNeverClaimedIdleAfterADayWithNothingInProgress(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_idle.yaml")
		run := start(t, e, "idle", nil).GetRunId()
		s := state(t, e, run)
		noFinding(t, s, "never_claimed_idle")
		wantStatus(t, s, "ok")

		e.clock.Advance(23 * time.Hour)
		noFinding(t, state(t, e, run), "never_claimed_idle") // under the 24 h threshold

		// The seed's run had not changed for two days.
		e.clock.Advance(25*time.Hour + 15275*time.Millisecond)
		s = state(t, e, run)
		wantStatus(t, s, "ok") // 'a' can still be called
		f := finding(t, s, "never_claimed_idle", "")
		golden(t, "never_claimed_idle", f, `{
  "kind": "never_claimed_idle",
  "reason": "parked with no claimed step, idle",
  "since": "2026-09-29T23:39:44.004Z",
  "idle_ms": 172815275,
  "evidence": { "idle_threshold_ms": 86400000, "eligible_steps": ["a"] }
}`, map[string]string{"2026-09-29T23:39:44.004Z": loadDoc(t, e, run).UpdatedAt}, "idle_ms")
		if ms := num(f["idle_ms"]); ms < 172815275 || ms > 172815275+60000 {
			t.Errorf("idle_ms = %d, want the two days since the run last changed", ms)
		}
		wantLabel(t, e, run, "") // the line ends after `idle:`
	})
}

// A run with a step in progress is never idle, however long it waits: its
// claim is what is reported.
func TestAStepInProgressIsNeverReportedIdle(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		h := hangingRunner(t, e, "fetch")
		registerFile(t, e, "health_sync.yaml")
		run := h.startHung(t, e, "sync", "fetch")
		e.clock.Advance(25 * time.Hour)
		s := state(t, e, run)
		noFinding(t, s, "never_claimed_idle")
		finding(t, s, "stale_claim", "fetch")
	})
}

func TestStaleClaimOnceAKilledHoldersDeadlinePasses(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		h := hangingRunner(t, e, "fetch")
		registerFile(t, e, "health_sync.yaml")
		run := h.startHung(t, e, "sync", "fetch")
		s := state(t, e, run)
		wantStatus(t, s, "ok") // healthy: in flight elsewhere
		noFinding(t, s, "stale_claim")

		// 15 minutes after the step started: past the claim window
		// (30 s + 1 min, at least 15 min).
		e.clock.Advance(15 * time.Minute)
		s = state(t, e, run)
		wantStatus(t, s, "claim_stale")
		deadline := *loadDoc(t, e, run).Claims["fetch"].Deadline
		golden(t, "stale_claim", finding(t, s, "stale_claim", "fetch"), `{
  "kind": "stale_claim",
  "step": "fetch",
  "reason": "claim_stale",
  "evidence": { "state": "claim_stale", "deadline": "2026-10-01T23:53:39.499Z" }
}`, map[string]string{"2026-10-01T23:53:39.499Z": deadline})
		stuck, _ := extra(s)["stuck_claims"].([]any)
		if len(stuck) != 1 || !reflect.DeepEqual(stuck[0], map[string]any{"step": "fetch", "state": "claim_stale", "deadline": deadline}) {
			t.Errorf("stuck_claims = %v, want the same step as the finding", stuck)
		}
		wantLabel(t, e, run, "fetch=claim_stale")
	})
}

// A workflow with a finalizer makes claims with no deadline: the finding is
// there from the start, and with nothing else to call the status says so.
func TestClaimUnknownAgeWhenRealmHasNoTimeLimit(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		h := hangingRunner(t, e, "fetch")
		registerFile(t, e, "health_tidy.yaml")
		run := h.startHung(t, e, "tidy2", "fetch")
		s := state(t, e, run)
		wantStatus(t, s, "claim_unknown_age")
		if len(s.GetNextActions()) != 0 {
			t.Errorf("next_actions = %v, want none", actionTools(s))
		}
		golden(t, "stale_claim (unknown age)", finding(t, s, "stale_claim", "fetch"), `{
  "kind": "stale_claim",
  "step": "fetch",
  "reason": "claim_unknown_age",
  "evidence": { "state": "claim_unknown_age", "deadline": null }
}`, nil)
		stuck, _ := extra(s)["stuck_claims"].([]any)
		if len(stuck) != 1 || !reflect.DeepEqual(stuck[0], map[string]any{"step": "fetch", "state": "claim_unknown_age", "deadline": nil}) {
			t.Errorf("stuck_claims = %v", stuck)
		}
		wantLabel(t, e, run, "fetch=claim_unknown_age")
	})
}

func TestWedgedGateSiblingKeepsAwaitingHumanWhileTheGateHasTime(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		h := hangingRunner(t, e, "fetch")
		registerFile(t, e, "health_fan.yaml")
		run := h.startHung(t, e, "fan", "fetch")
		openGateOn(t, e, run, "approve")
		e.clock.Advance(15 * time.Minute)
		s := state(t, e, run)
		if s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING {
			t.Fatalf("phase = %v", s.GetRunPhase())
		}
		wantStatus(t, s, "awaiting_human") // awaiting_human comes before claim_stale
		noFinding(t, s, "stale_claim")
		deadline := *loadDoc(t, e, run).Claims["fetch"].Deadline
		golden(t, "wedged_gate_sibling", finding(t, s, "wedged_gate_sibling", "fetch"), `{
  "kind": "wedged_gate_sibling",
  "step": "fetch",
  "reason": "claim_stale",
  "evidence": { "state": "claim_stale", "deadline": "2026-10-01T23:53:41.736Z" }
}`, map[string]string{"2026-10-01T23:53:41.736Z": deadline})
		for _, f := range findings(s) {
			if f["step"] == "approve" {
				t.Errorf("the gate's own step is reported: %v", f)
			}
		}
		wantLabel(t, e, run, "fetch=claim_stale")
	})
}

// Once the gate's time is up and it declares on_expiry, the status is
// worked out as for a run with no gate: the stale sibling makes it
// claim_stale.
func TestWedgedGateSiblingIsClaimStaleOnceTheGateExpires(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		h := hangingRunner(t, e, "fetch")
		registerFile(t, e, "health_fan_expiring.yaml")
		run := h.startHung(t, e, "fan_expiring", "fetch")
		openGateOn(t, e, run, "approve")
		e.clock.Advance(15 * time.Minute)
		s := state(t, e, run)
		wantStatus(t, s, "claim_stale")
		finding(t, s, "wedged_gate_sibling", "fetch")
		if f := finding(t, s, "gate_expired_awaiting_drive", "approve"); f["evidence"].(map[string]any)["disposition"] != "abort" {
			t.Errorf("gate_expired_awaiting_drive = %v", f)
		}
	})
}

func TestCapabilityBlockWhenNoRunnerHasTheHandler(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_orders.yaml")
		run := start(t, e, "orders", nil).GetRunId()
		s := state(t, e, run)
		wantStatus(t, s, "blocked_on_capability")
		since := loadDoc(t, e, run).CapabilityBlocks["total"].At
		golden(t, "capability_block", finding(t, s, "capability_block", "total"), `{
  "kind": "capability_block",
  "step": "total",
  "reason": "ENGINE_HANDLER_NOT_REGISTERED",
  "since": "2026-10-01T20:15:33.944Z",
  "evidence": {
    "requirement": { "kind": "handler", "name": "order_totl" },
    "code": "ENGINE_HANDLER_NOT_REGISTERED"
  }
}`, map[string]string{"2026-10-01T20:15:33.944Z": since})
		if !strings.Contains(healthBlock(inspectText(t, e, run)), "  capability_block [total]: ENGINE_HANDLER_NOT_REGISTERED\n") {
			t.Errorf("inspect's Run Health = %q", healthBlock(inspectText(t, e, run)))
		}

		// A runner with the handler arrives: get_run_state judges with this
		// server's extensions and drops the finding; the record keeps the
		// block, and inspect reads the record alone.
		startRunner(t, e, map[string]handlerFunc{"order_totl": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"total": 3.0})}, nil
		}})
		s = state(t, e, run)
		noFinding(t, s, "capability_block")
		wantStatus(t, s, "advance_owed")
		if _, ok := extra(s)["capability_blocks"].(map[string]any)["total"]; !ok {
			t.Errorf("capability_blocks lost the record: %v", extra(s)["capability_blocks"])
		}
		if !strings.Contains(healthBlock(inspectText(t, e, run)), "  capability_block [total]: ENGINE_HANDLER_NOT_REGISTERED\n") {
			t.Errorf("inspect once a runner has it = %q", healthBlock(inspectText(t, e, run)))
		}
	})
}

func TestGateExpiredAwaitingDriveUntilAdvanceCarriesItOut(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_gated.yaml")
		opened := start(t, e, "gated", nil)
		run, gate := opened.GetRunId(), opened.GetGate().GetGateId()
		s := state(t, e, run)
		wantStatus(t, s, "awaiting_human")
		noFinding(t, s, "gate_expired_awaiting_drive")

		e.clock.Advance(60*time.Second + 18108*time.Millisecond)
		s = state(t, e, run)
		wantStatus(t, s, "advance_owed")
		if got := actionTools(s); !slices.Equal(got, []string{"advance_run"}) {
			t.Errorf("next_actions = %v, want [advance_run]", got)
		}
		f := finding(t, s, "gate_expired_awaiting_drive", "approve")
		golden(t, "gate_expired_awaiting_drive", f, `{
  "kind": "gate_expired_awaiting_drive",
  "step": "approve",
  "reason": "gate expired — awaiting enactment of the declared abort",
  "evidence": {
    "gate_id": "60d9660a-cdf5-41b5-8c20-d1739faba3ce",
    "expires_at": "2026-10-01T23:39:39.676Z",
    "overdue_ms": 18108,
    "disposition": "abort"
  }
}`, map[string]string{"60d9660a-cdf5-41b5-8c20-d1739faba3ce": gate, "2026-10-01T23:39:39.676Z": loadDoc(t, e, run).PendingGate.ExpiresAt},
			"evidence.overdue_ms")
		if ms := num(f["evidence"].(map[string]any)["overdue_ms"]); ms < 18108 || ms > 18108+60000 {
			t.Errorf("overdue_ms = %d", ms)
		}
		wantLabel(t, e, run, "approve=gate_expired(abort) (realm run advance)")

		if r := advance(t, e, run); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_ABORTED {
			t.Fatalf("advance = %v", r)
		}
		s = state(t, e, run)
		wantStatus(t, s, "skipped_terminal")
		if len(findings(s)) != 0 {
			t.Errorf("an ended run's run_health = %v, want absent", kinds(findings(s)))
		}
	})
}

// A gate with a time limit and no on_expiry stays awaiting_human when its
// time is up; the finding says only an answer moves it.
func TestExpiredGateWithoutOnExpiryStaysAwaitingHuman(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_gated_no_expiry.yaml")
		opened := start(t, e, "gated_open", nil)
		e.clock.Advance(2 * time.Minute)
		s := state(t, e, opened.GetRunId())
		wantStatus(t, s, "awaiting_human")
		f := finding(t, s, "gate_expired_awaiting_drive", "approve")
		ev := f["evidence"].(map[string]any)
		if ev["disposition"] != "finding_only" || ev["gate_id"] != opened.GetGate().GetGateId() {
			t.Errorf("gate_expired_awaiting_drive = %v", f)
		}
		if got := actionTools(s); !slices.Equal(got, []string{"submit_human_response"}) {
			t.Errorf("next_actions = %v, want the answer", got)
		}
	})
}

func TestGuardAwaitingSettlementOnlyForABatchCreatedRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_limit.yaml")
		b, err := e.client.StartRunBatch(ctx(t), &realmv1.StartRunBatchRequest{WorkflowId: "limit",
			Items: []*realmv1.BatchItem{{Params: params(t, map[string]any{"amount": 5000})}}})
		if err != nil || len(b.GetStarted()) != 1 {
			t.Fatalf("batch = %v %v", b, err)
		}
		run := b.GetStarted()[0].GetRunId()
		s := state(t, e, run)
		wantStatus(t, s, "advance_owed")
		if got := actionTools(s); !slices.Equal(got, []string{"advance_run"}) {
			t.Errorf("next_actions = %v, want [advance_run]", got)
		}
		golden(t, "guard_awaiting_settlement", finding(t, s, "guard_awaiting_settlement", "limit"), `{
  "kind": "guard_awaiting_settlement",
  "step": "limit",
  "reason": "guard 'limit' is eligible and has not been settled"
}`, nil)

		// advance_run decides it. (A guard cannot read run.params, so this
		// one ends the run with a resolution error: decided all the same.)
		adv := advance(t, e, run)
		if s := state(t, e, run); s.GetSealedByStep() != "limit" || !s.GetTerminalState() {
			t.Errorf("after advance: %v %v", s.GetSealedByArm(), s.GetSealedByStep())
		}
		// Its hint ends with the way back in, as an answer's reply does.
		if want := "To make the failed step runnable again: realm run resume " + run + " --from limit"; !strings.HasSuffix(adv.GetContextHint(), want) {
			t.Errorf("advance's hint = %q, want it to end with %q", adv.GetContextHint(), want)
		}

		// start_run decides such a guard itself: its run never has it.
		r := start(t, e, "limit", map[string]any{"amount": 10})
		s = state(t, e, r.GetRunId())
		if s.GetSealedByStep() != "limit" || extra(s)["pending_guards"] != nil || len(findings(s)) != 0 {
			t.Errorf("the seed: a run start_run creates never has guard_awaiting_settlement, start_run decides the guard itself; "+
				"got sealed_by_step %q, pending_guards %v, run_health %v", s.GetSealedByStep(), extra(s)["pending_guards"], kinds(findings(s)))
		}
	})
}

// A workflow registered by an older version with trust: human_confirm: its
// stored copy is written into the store as that version left it.
func TestTrustValueInvalidForAnOldVersionsRegisteredCopy(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		if _, err := e.st.PutWorkflow(ctx(t), "review", readFile(t, "testdata/health_fixtures/review_v038_workflow.json")); err != nil {
			t.Fatal(err)
		}
		run := start(t, e, "review", nil).GetRunId()
		if run == "" {
			t.Fatal("start_run of the old copy made no run")
		}
		s := state(t, e, run)
		golden(t, "trust_value_invalid", finding(t, s, "trust_value_invalid", "review"), `{
  "kind": "trust_value_invalid",
  "step": "review",
  "reason": "'trust: \"human_confirm\"' is not a recognized value — the engine will refuse this step at dispatch (VALIDATION_TRUST_VALUE). Accepts auto, human_confirmed, human_reviewed; did you mean 'human_confirmed'? — correct the value and 'realm workflow register <path>'.",
  "evidence": { "trust": "human_confirm" }
}`, nil)
		// ok with an empty next_actions: the refused agent step is named in
		// agent_refused and never offered.
		wantStatus(t, s, "ok")
		if len(s.GetNextActions()) != 0 {
			t.Errorf("next_actions = %v, want none: the seed never offers an agent step refused for its trust", actionTools(s))
		}
		refused, _ := extra(s)["agent_refused"].([]any)
		if len(refused) != 1 || refused[0].(map[string]any)["step"] != "review" || refused[0].(map[string]any)["refused_by"] != "trust" {
			t.Errorf("agent_refused = %v, want 'review' refused_by trust (the seed: an agent step with an invalid trust is named in agent_refused and never offered)", refused)
		}
	})
}

func TestDefinitionUnresolvableWhenAnAgentsWorkflowIsGone(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		steps := value(t, []any{map[string]any{"id": "collect", "description": "Collect the changes."}}).GetListValue()
		resp, err := e.client.CreateWorkflow(ctx(t), &realmv1.CreateWorkflowRequest{Steps: steps})
		if err != nil {
			t.Fatal(err)
		}
		wf, _ := resp.GetReply().GetData().AsMap()["workflow_id"].(string)
		run := resp.GetReply().GetRunId()
		if !strings.HasPrefix(wf, "dynamic-") || run == "" {
			t.Fatalf("create_workflow = %v", resp.GetReply())
		}
		wantStatus(t, state(t, e, run), "ok")

		// Its stored copy is removed from Redis.
		if err := e.rc.Del(ctx(t), e.prefix+":wf:"+wf).Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.rc.ZRem(ctx(t), e.prefix+":workflows", wf).Err(); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(3 * time.Second) // past the engine's definition cache (2 s)
		s := state(t, e, run)
		wantStatus(t, s, "workflow_unresolved")
		if len(s.GetNextActions()) != 0 {
			t.Errorf("next_actions = %v, want none", actionTools(s))
		}
		golden(t, "definition_unresolvable", finding(t, s, "definition_unresolvable", ""), `{
  "kind": "definition_unresolvable",
  "reason": "Workflow 'dynamic-67280ddfb5f913a2' not found — this run's workflow was created by an agent (create_workflow) and its stored copy is gone; there is no source file to register. To end the run: realm run abandon 88620ee8-f8c1-4889-9468-a62dcb1b3c8f.",
  "evidence": { "workflow_id": "dynamic-67280ddfb5f913a2", "code": "STATE_WORKFLOW_NOT_FOUND" }
}`, map[string]string{"dynamic-67280ddfb5f913a2": wf, "88620ee8-f8c1-4889-9468-a62dcb1b3c8f": run})
	})
}

func TestDriveFailingWhileTheFailedDriveIsTheLastThingThatHappened(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_drive.yaml")
		run := start(t, e, "drive", nil).GetRunId()
		at := record.FormatTime(e.clock.Now())
		ceiling := int64(1861500)
		if _, err := e.client.RecordDriveFailure(ctx(t), &realmv1.RecordDriveFailureRequest{RunId: run, Failure: &realmv1.DriveFailure{
			At: at, Step: "classify", Provider: "anthropic", ErrorClass: "connection_error", Message: "Connection error.",
			ElapsedMs: 1861500, DerivedCeilingMs: &ceiling}}); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(17 * time.Minute)
		s := state(t, e, run)
		wantStatus(t, s, "ok")
		golden(t, "drive_failing", finding(t, s, "drive_failing", "classify"), `{
    "kind": "drive_failing",
    "step": "classify",
    "reason": "the last drive attempt failed 17m ago (connection_error): Connection error.",
    "evidence": {
      "step": "classify",
      "error_class": "connection_error",
      "at": "2026-10-01T23:21:18.899Z",
      "total": 1,
      "first_failed_at": "2026-10-01T23:21:18.899Z",
      "derived_ceiling_ms": 1861500
    }
  }`, map[string]string{"2026-10-01T23:21:18.899Z": at})

		// The step then runs: the failed drive is no longer the last thing
		// that happened to the run.
		if r := step(t, e, run, "classify", map[string]any{"category": "billing"}); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("classify = %v", r)
		}
		for _, f := range findings(state(t, e, run)) {
			if f["kind"] == "drive_failing" {
				t.Errorf("drive_failing is still reported after 'classify' ran; the seed finds it only while the failed drive is the last thing that happened to the run: %v", f)
			}
		}
	})
}

// gate_corruption: a record (written by an old version) whose gate is both
// answered and open.
func TestGateCorruptionFromAnOldVersionRecord(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_classify.yaml")
		run, gate := commitFixture(t, e, "gate_corruption_run.json")
		s := state(t, e, run)
		wantStatus(t, s, "awaiting_human")
		f := finding(t, s, "gate_corruption", "approve")
		if ev, _ := f["evidence"].(map[string]any); ev["gate_id"] != gate || !strings.Contains(fmt.Sprint(f["reason"]), gate) {
			t.Errorf("gate_corruption = %v", f)
		}
		if got := healthBlock(inspectText(t, e, run)); !strings.Contains(got, "  gate_corruption [approve]: ") {
			t.Errorf("inspect's Run Health = %q", got)
		}
	})
}

func TestStructuredOutputDowngradedOnAnOpenRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_classify.yaml")
		run, _ := commitFixture(t, e, "downgraded_open_run.json", "classify_entry.json")
		s := state(t, e, run)
		wantStatus(t, s, "ok")
		// The seed lists it among the findings of an open run, which
		// get_run_state reports.
		f := finding(t, s, "structured_output_downgraded", "")
		if f["reason"] != "1 step(s) requested strict structured output but ran without it (classify: compat_endpoint) — outputs were validated post-hoc (L1), not grammar-constrained" {
			t.Errorf("structured_output_downgraded = %v", f)
		}
	})
}

// --- findings about ended runs (inspect's Run Health) ------------------------

// ended checks what get_run_state says of an ended run: skipped_terminal,
// no next_actions and no run_health.
func ended(t *testing.T, e *env, run string) *realmv1.RunState {
	t.Helper()
	s := state(t, e, run)
	if !s.GetTerminalState() {
		t.Fatalf("run %s is open: %v", run, s.GetRunPhase())
	}
	wantStatus(t, s, "skipped_terminal")
	if len(s.GetNextActions()) != 0 || extra(s)["run_health"] != nil {
		t.Errorf("ended run: next_actions %v, run_health %v", actionTools(s), extra(s)["run_health"])
	}
	return s
}

func TestTerminalPendingFinalizerNamesItsLease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_release.yaml")

		// No runner has the finalizer's handler: it stays pending, never leased.
		idle := start(t, e, "release", nil).GetRunId()
		if r := step(t, e, idle, "work", map[string]any{"done": true}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("work = %v", r)
		}
		ended(t, e, idle)
		if got := healthBlock(inspectText(t, e, idle)); got != "Run Health (1 finding(s)):\n  terminal_pending_finalizer [release]: never_leased\n" {
			t.Errorf("never leased: %q", got)
		}

		// A drainer holds it (its handler hangs): the seed's lease_held.
		h := hangingRunner(t, e, "release")
		held := start(t, e, "release", nil).GetRunId()
		h.goCall(func() {
			_, _ = e.client.ExecuteStep(context.Background(), &realmv1.ExecuteStepRequest{RunId: held, Command: "work", Params: params(t, map[string]any{"done": true})})
		})
		for i := 0; i < 500; i++ {
			if f := loadDoc(t, e, held).FinalizerLedger["release"]; f != nil && f.LeaseToken != "" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		ended(t, e, held)
		if got := healthBlock(inspectText(t, e, held)); got != "Run Health (1 finding(s)):\n  terminal_pending_finalizer [release]: lease_held\n" {
			t.Errorf("lease held: %q, want the seed's block", got)
		}
		// Its lease (30 s) passes with the drainer still silent.
		e.clock.Advance(time.Minute)
		if got := healthBlock(inspectText(t, e, held)); got != "Run Health (1 finding(s)):\n  terminal_pending_finalizer [release]: lease_expired\n" {
			t.Errorf("lease expired: %q", got)
		}
	})
}

func TestCompletedWithFailedSteps(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		startRunner(t, e, map[string]handlerFunc{"fetch": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			return &realmv1.ExecuteHandlerResponse{Error: &realmv1.HandlerError{Message: "the source is down"}}, nil
		}})
		registerFile(t, e, "health_fetchfail.yaml")
		run := start(t, e, "fetchfail", nil).GetRunId()
		if r := step(t, e, run, "report", map[string]any{"text": "fetch failed"}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("report = %v (state %v)", r, state(t, e, run))
		}
		ended(t, e, run)
		want := "Run Health (1 finding(s)):\n  completed_with_failed_steps: completed with 1 failed step(s): fetch — fail-triggered finalizers do not run on a completed seal unless the workflow opts into the 'completed_with_failed_steps' trigger\n"
		if got := healthBlock(inspectText(t, e, run)); got != want {
			t.Errorf("inspect's Run Health:\n got %q\nwant %q", got, want)
		}
	})
}

func TestStructuredOutputDowngradedOnAnEndedRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_classify.yaml")
		run, _ := commitFixture(t, e, "downgraded_ended_run.json", "classify_entry.json")
		ended(t, e, run)
		want := "Run Health (1 finding(s)):\n  structured_output_downgraded: 1 step(s) requested strict structured output but ran without it (classify: compat_endpoint) — outputs were validated post-hoc (L1), not grammar-constrained\n"
		if got := healthBlock(inspectText(t, e, run)); got != want {
			t.Errorf("inspect's Run Health:\n got %q\nwant %q", got, want)
		}
	})
}

// terminal_with_stale_gate: an ended record that still holds an open gate,
// as only old versions wrote.
func TestTerminalWithStaleGateFromAnOldVersionRecord(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_classify.yaml")
		run, gate := commitFixture(t, e, "stale_gate_run.json")
		ended(t, e, run)
		got := healthBlock(inspectText(t, e, run))
		if !strings.HasPrefix(got, "Run Health (1 finding(s)):\n  terminal_with_stale_gate [approve]: ") || !strings.Contains(got, gate) {
			t.Errorf("inspect's Run Health = %q", got)
		}
	})
}

// --- next_actions_status precedence ----------------------------------------

// awaiting_human comes before blocked_on_capability.
func TestAwaitingHumanComesBeforeBlockedOnCapability(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		registerFile(t, e, "health_capgate.yaml")
		run := start(t, e, "capgate", nil).GetRunId()
		// Nothing else is owed to the engine: blocked_on_capability, with
		// the ready agent step still offered.
		s := state(t, e, run)
		wantStatus(t, s, "blocked_on_capability")
		if got := actionTools(s); !slices.Equal(got, []string{"execute_step"}) {
			t.Errorf("next_actions = %v, want the ready agent step", got)
		}
		openGateOn(t, e, run, "approve")
		s = state(t, e, run)
		wantStatus(t, s, "awaiting_human")
		finding(t, s, "capability_block", "total")
	})
}

// blocked_on_capability comes before claim_stale.
func TestBlockedOnCapabilityComesBeforeClaimStale(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		h := hangingRunner(t, e, "fetch")
		registerFile(t, e, "health_capstale.yaml")
		run := h.startHung(t, e, "capstale", "fetch")
		e.clock.Advance(15 * time.Minute)
		s := state(t, e, run)
		wantStatus(t, s, "blocked_on_capability")
		finding(t, s, "stale_claim", "fetch")
		finding(t, s, "capability_block", "total")
	})
}
