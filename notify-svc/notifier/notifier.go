// Package notifier tells people in Slack about every gate the engine
// opens, reminds them, escalates once and says how each gate ended.
//
// It learns of gates from the engine store's gate outbox: per bucket, the
// sorted set "open_gates" (run id -> the open gate's opened_at in ms), which
// the engine's commit script changes in the very write that opens or ends
// a gate. A gate is followed from the first scan that sees it until a scan
// no longer does; what to post, and when, is kept in Redis (queue.go), so
// the work survives a restart and is split between replicas.
package notifier

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/notify-svc/slackgate"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// Options configure a Notifier.
type Options struct {
	// Redis holds the engine's store and the notifier's own keys.
	Redis redis.UniversalClient
	// EnginePrefix is the engine store's key prefix (engine-svc
	// --redis-prefix), where the gate outbox is read.
	EnginePrefix string
	// Prefix is where the notifier's own keys go (default EnginePrefix).
	Prefix string
	Engine realmv1.EngineServiceClient
	Poster slackgate.Poster
	// Webhook is set when Poster is an incoming webhook: the gate message
	// sends readers to a terminal, and nothing follows it (no thread).
	Webhook bool
	// Replies is set when replies in a thread are read (Socket Mode or
	// the Events API); without, each post says the terminal is the way.
	Replies bool
	// ReminderInterval is the operator reminder of a gate that declares no
	// reminder_seconds; EscalationThreshold the one escalation.
	ReminderInterval, EscalationThreshold time.Duration
	// Lease is how long a claimed job is its claimer's (default 30s): a
	// killed replica's job runs again after it.
	Lease time.Duration
	Log   *slog.Logger
	Now   func() time.Time
}

// Notifier follows gates and posts about them.
type Notifier struct {
	o Options
	q *queue
	// noHistory says once that the channel cannot be read back.
	noHistory sync.Once
}

// New returns a notifier; it does nothing until Tick or Run.
func New(o Options) *Notifier {
	if o.Prefix == "" {
		o.Prefix = o.EnginePrefix
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Notifier{o: o, q: newQueue(o.Redis, o.Prefix, o.Lease.Milliseconds())}
}

// Run ticks every interval until ctx ends; a failed tick is logged and
// the next one tries again.
func (n *Notifier) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := n.Tick(ctx); err != nil && ctx.Err() == nil {
			n.o.Log.Warn("notify: tick failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick follows the gates the outbox holds now, schedules the resolution
// of those it no longer holds, and runs every job that is due.
func (n *Notifier) Tick(ctx context.Context) error {
	if err := n.scan(ctx); err != nil {
		return err
	}
	for range 1000 { // bounded: the rest is the next tick's
		done, err := n.runOne(ctx)
		if err != nil || done {
			return err
		}
	}
	return nil
}

// scan reads the followed gates first and the outbox second: a followed
// gate missing from the later outbox read has surely ended.
func (n *Notifier) scan(ctx context.Context) error {
	followed, err := n.q.tracked(ctx)
	if err != nil {
		return fmt.Errorf("read followed gates: %w", err)
	}
	open, err := n.outbox(ctx)
	if err != nil {
		return err
	}
	now := n.o.Now().UnixMilli()
	for key := range open {
		if err := n.q.track(ctx, key, now); err != nil {
			return fmt.Errorf("follow gate %s: %w", key, err)
		}
	}
	for _, key := range followed {
		if !open[key] {
			if err := n.q.resolve(ctx, key, now); err != nil {
				return fmt.Errorf("resolve gate %s: %w", key, err)
			}
		}
	}
	return nil
}

// outbox reads every bucket's gate outbox in one pipeline.
func (n *Notifier) outbox(ctx context.Context) (map[string]bool, error) {
	p := n.o.EnginePrefix
	buckets, err := n.o.Redis.HGet(ctx, p+":meta", "buckets").Int()
	if err == redis.Nil {
		return map[string]bool{}, nil // no run was ever stored
	}
	if err != nil {
		return nil, fmt.Errorf("read the store's bucket count (%s:meta): %w", p, err)
	}
	cmds := make([]*redis.ZSliceCmd, buckets)
	_, err = n.o.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for b := range buckets {
			cmds[b] = pl.ZRangeWithScores(ctx, p+":{b"+strconv.Itoa(b)+"}:open_gates", 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the gate outbox: %w", err)
	}
	open := map[string]bool{}
	for _, c := range cmds {
		for _, z := range c.Val() {
			open[gateKey(z.Member.(string), int64(z.Score))] = true
		}
	}
	return open, nil
}

// record is what the notifier keeps of a followed gate once posted.
type record struct {
	Run        string            `json:"run"`
	GateID     string            `json:"gate_id"`
	Step       string            `json:"step"`
	Owner      string            `json:"owner,omitempty"`
	TS         string            `json:"ts,omitempty"` // thread anchor
	OpenedMS   int64             `json:"opened_ms"`
	ExpiresMS  int64             `json:"expires_ms,omitempty"`
	OnExpiry   string            `json:"on_expiry,omitempty"`
	EveryMS    int64             `json:"every_ms,omitempty"` // authored reminder_seconds
	Max        int               `json:"max,omitempty"`
	Sent       int               `json:"sent,omitempty"` // reminders posted
	Resolution map[string]string `json:"resolution_messages,omitempty"`
	Choices    []string          `json:"choices,omitempty"`
}

// runOne claims and runs one due job; done is true when none was due.
func (n *Notifier) runOne(ctx context.Context) (done bool, err error) {
	now := n.o.Now()
	job, lease, claims, err := n.q.claim(ctx, now.UnixMilli())
	if err != nil || job == "" {
		return true, err
	}
	// Claimed before: its claimer may have died after Slack took the post
	// and before the finish, so the post is looked for before it is made.
	again := claims > 1 && !n.o.Webhook
	kind, key, _ := strings.Cut(job, "|")
	raw, err := n.q.record(ctx, key)
	if err == redis.Nil {
		_, err = n.q.finish(ctx, job, lease, key, "")
		return false, err
	}
	if err != nil {
		return false, err
	}
	var rec record
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return false, fmt.Errorf("gate %s: record %q: %w", key, raw, err)
	}
	run, openedMS := splitKey(key)
	var update string
	var then []next
	switch kind {
	case "open":
		update, then, err = n.open(ctx, run, openedMS, now, again)
	case "remind":
		update, then, err = n.remind(ctx, &rec, now, again)
	case "escalate":
		err = n.escalate(ctx, &rec, now, again)
	case "resolved":
		update, then, err = n.resolved(ctx, key, &rec, now, again)
	default:
		n.o.Log.Warn("notify: unknown job dropped", "job", job)
	}
	if err != nil {
		// The job stays leased: it runs again when the lease ends.
		n.o.Log.Warn("notify: job failed; it is retried after its lease", "job", job, "code", CodeOf(err), "err", err)
		return false, nil
	}
	_, err = n.q.finish(ctx, job, lease, key, update, then...)
	return false, err
}

func splitKey(key string) (string, int64) {
	i := strings.LastIndexByte(key, '@')
	ms, _ := strconv.ParseInt(key[i+1:], 10, 64)
	return key[:i], ms
}

// openGate reads the run's open gate; nil when it is not the gate opened
// at openedMS any more.
func (n *Notifier) openGate(ctx context.Context, run string, openedMS int64) (*realmv1.PendingGate, error) {
	resp, err := n.o.Engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: run})
	if err != nil {
		return nil, fmt.Errorf("get_run_state %s: %w", run, err)
	}
	g := resp.GetState().GetPendingGate()
	if g == nil || resp.GetState().GetTerminalState() || g.GetOpenedAt().AsTime().UnixMilli() != openedMS {
		return nil, nil
	}
	return g, nil
}

// open posts the gate message and schedules what follows it.
func (n *Notifier) open(ctx context.Context, run string, openedMS int64, now time.Time, again bool) (string, []next, error) {
	g, err := n.openGate(ctx, run, openedMS)
	if err != nil || g == nil {
		return "", nil, err // gone before it was posted: nothing to say
	}
	rec := record{Run: run, GateID: g.GetGateId(), Step: g.GetStepName(), Owner: g.GetOwner(), OpenedMS: openedMS, Choices: g.GetChoices(),
		OnExpiry: g.GetOnExpiry(), EveryMS: int64(g.GetReminderSeconds()) * 1000, Max: int(g.GetReminderMax())}
	if g.GetExpiresAt() != nil {
		rec.ExpiresMS = g.GetExpiresAt().AsTime().UnixMilli()
	}
	if rec.Max == 0 {
		rec.Max = 3
	}
	if m := g.GetResolutionMessages().AsMap(); len(m) > 0 {
		rec.Resolution = map[string]string{}
		for k, v := range m {
			rec.Resolution[k], _ = v.(string)
		}
	}
	gate := slackgate.Gate{RunID: run, GateID: rec.GateID, Step: rec.Step, Owner: rec.Owner,
		Message: g.GetResolvedMessage(), Preview: g.GetPreview().AsInterface(), Choices: g.GetChoices()}
	var ts string
	if again {
		// A claimer that died after Slack took the message: its thread is
		// adopted.
		if ts, err = n.o.Poster.FindGate(ctx, gate, time.UnixMilli(openedMS).Add(-findMargin)); n.unread(err) {
			err = nil
		}
		if err != nil {
			return "", nil, err
		}
		if ts != "" {
			n.o.Log.Info("notify: the gate message was posted before its notifier stopped; its thread is adopted", "run_id", run, "gate_id", rec.GateID, "ts", ts)
		}
	}
	if ts == "" {
		ts, err = n.o.Poster.PostGate(ctx, gate)
		if err != nil && !slackgate.Refused(err) {
			return "", nil, err // maybe posted: the re-claim looks first
		}
		if err != nil {
			// The original's rule: a failed post is a warning, never the run's.
			n.warnPost("the gate message", rec.Run, rec.GateID, err)
		}
	}
	rec.TS = ts
	if ts != "" {
		// Where a reply in the thread finds its gate.
		if err := n.q.rc.HSet(ctx, n.q.threads, ts, gateKey(run, openedMS)).Err(); err != nil {
			n.o.Log.Warn("notify: the thread of a gate could not be kept; replies in it will not be read", "run_id", run, "err", err)
		}
	}
	switch {
	case err != nil:
	case ts != "" && !n.o.Replies:
		// The original's line for the post-only topology, once per gate.
		n.o.Log.Info("  ℹ  Gate notification posted. Configure app_token (Socket Mode) or signing_secret + events_port (Events API) under notifiers.slack_gate in realm.yaml to resolve via Slack. Using terminal command fallback.", "run_id", run, "gate_id", rec.GateID)
	case ts == "" && !n.o.Webhook:
		n.o.Log.Info("  ℹ  Bidirectional Slack resolution unavailable (no thread anchor). Use terminal command shown above.", "run_id", run, "gate_id", rec.GateID)
	}
	var then []next
	if ts != "" && rec.ExpiresMS > 0 {
		// The operator's reminder applies only where no reminder_seconds
		// was authored; the escalation always.
		operator := n.o.ReminderInterval
		if rec.EveryMS > 0 {
			operator = 0
		}
		if line := deadNotification(rec.Step, rec.ExpiresMS-openedMS, operator, n.o.EscalationThreshold); line != "" {
			n.o.Log.Warn(line, "run_id", run, "gate_id", rec.GateID)
		}
	}
	if ts != "" { // reminders and the escalation live in the thread
		first := openedMS + n.o.ReminderInterval.Milliseconds()
		if rec.EveryMS > 0 {
			first = openedMS + rec.EveryMS
		}
		then = append(then, next{first, "remind|" + gateKey(run, openedMS)},
			next{openedMS + n.o.EscalationThreshold.Milliseconds(), "escalate|" + gateKey(run, openedMS)})
	}
	b, _ := json.Marshal(rec)
	return string(b), then, nil
}

// remind posts the next reminder: every reminder_seconds up to
// reminder_max when the gate declares it (the one landing at or after
// the expiry in the final wording, and the last), else the operator's one.
func (n *Notifier) remind(ctx context.Context, rec *record, now time.Time, again bool) (string, []next, error) {
	g, err := n.openGate(ctx, rec.Run, rec.OpenedMS)
	if err != nil || g == nil {
		return "", nil, err
	}
	rec.Sent++
	due := rec.OpenedMS + n.o.ReminderInterval.Milliseconds()
	if rec.EveryMS > 0 {
		due = rec.OpenedMS + int64(rec.Sent)*rec.EveryMS
	}
	text, last := slackgate.Reminder(rec.Step), rec.EveryMS == 0 || rec.Sent >= rec.Max
	if rec.ExpiresMS > 0 && due >= rec.ExpiresMS {
		text, last = slackgate.Final(rec.Step, now.Sub(time.UnixMilli(rec.ExpiresMS)), rec.OnExpiry), true
	}
	// Every reminder before this one is in the thread: one more is this.
	sent := func(texts []string) bool {
		c := 0
		for _, t := range texts {
			if slackgate.IsReminder(rec.Step, t) {
				c++
			}
		}
		return c >= rec.Sent
	}
	if err := n.reply(ctx, rec, text, again, sent, "a reminder"); err != nil {
		return "", nil, err
	}
	var then []next
	if !last {
		then = append(then, next{rec.OpenedMS + int64(rec.Sent+1)*rec.EveryMS, "remind|" + gateKey(rec.Run, rec.OpenedMS)})
	}
	b, _ := json.Marshal(rec)
	return string(b), then, nil
}

func (n *Notifier) escalate(ctx context.Context, rec *record, now time.Time, again bool) error {
	g, err := n.openGate(ctx, rec.Run, rec.OpenedMS)
	if err != nil || g == nil {
		return err
	}
	sent := func(texts []string) bool {
		return slices.ContainsFunc(texts, func(t string) bool { return slackgate.IsEscalation(rec.Step, t) })
	}
	return n.reply(ctx, rec, slackgate.Escalation(rec.Owner, rec.Step, now.Sub(time.UnixMilli(rec.OpenedMS))), again, sent, "the escalation")
}

// resolved says in the thread how the gate ended, then forgets it.
func (n *Notifier) resolved(ctx context.Context, key string, rec *record, now time.Time, again bool) (string, []next, error) {
	if opening, err := n.q.pending(ctx, "open|"+key); err != nil || opening {
		// The gate message is still being posted: its thread comes first.
		return "", []next{{now.Add(time.Second).UnixMilli(), "resolved|" + key}}, err
	}
	if rec.TS == "" {
		return "-", nil, nil
	}
	if err := n.q.rc.HDel(ctx, n.q.threads, rec.TS).Err(); err != nil {
		return "", nil, err
	}
	if err := n.q.rc.HDel(ctx, n.q.nudge, key).Err(); err != nil {
		return "", nil, err
	}
	exp, err := n.o.Engine.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: rec.Run})
	if err != nil {
		if strings.Contains(err.Error(), "Run not found") {
			return "-", nil, nil // purged: nothing left to tell
		}
		return "", nil, fmt.Errorf("export_run %s: %w", rec.Run, err)
	}
	var bundle struct {
		Run struct {
			ResolvedGates map[string]struct {
				Choice string `json:"choice"`
			} `json:"resolved_gates"`
		} `json:"run"`
	}
	if err := json.Unmarshal(exp.GetBundle(), &bundle); err != nil {
		return "", nil, fmt.Errorf("export_run %s: %w", rec.Run, err)
	}
	st, err := n.o.Engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: rec.Run})
	if err != nil {
		return "", nil, fmt.Errorf("get_run_state %s: %w", rec.Run, err)
	}
	choice := bundle.Run.ResolvedGates[rec.GateID].Choice
	ending := endingLines(st.GetState())
	var text string
	switch {
	case choice != "" && st.GetState().GetTerminalState():
		text = slackgate.ResolvedEnded(choice, ending)
	case choice != "":
		text = slackgate.Resolved(choice, rec.Resolution)
	case len(ending) > 0: // ended with no answer (an expiry's abort): the engine's cause
		text = strings.Join(ending, "\n")
	}
	if text != "" {
		sent := func(texts []string) bool { return slices.Contains(texts, text) }
		if err := n.reply(ctx, rec, text, again, sent, "the resolution"); err != nil {
			return "", nil, err
		}
	}
	return "-", nil, nil
}

// endingLines tell how a run ended, as the CLI prints a guard's ending
// (Guard step '<step>' aborted the run. / Reason: …), else the run's
// terminal reason; none for an open run.
func endingLines(s *realmv1.RunState) []string {
	if !s.GetTerminalState() {
		return nil
	}
	switch s.GetSealedByArm() {
	case "guard_abort":
		lines := []string{fmt.Sprintf("Guard step '%s' aborted the run.", s.GetSealedByStep())}
		if reason, _ := s.GetAbortContext().AsMap()["abort_message"].(string); reason != "" {
			lines = append(lines, "Reason: "+reason)
		}
		return lines
	case "guard_pass_complete":
		return []string{fmt.Sprintf("Guard step '%s' passed and completed the run.", s.GetSealedByStep())}
	}
	if s.GetTerminalReason() != "" {
		return []string{s.GetTerminalReason()}
	}
	return nil
}

func jsonUnmarshal(raw string, v any) error { return json.Unmarshal([]byte(raw), v) }

// deadNotification is the advisory said once per gate (agent-driver
// §14.3) when the operator's reminder or escalation cannot fire before
// the gate's authored timeout ("" when both can; reminder 0: the gate
// authored its own reminders). The spec gives only its
// start, `⚠ dead notification: `; the rest says which and what to do.
func deadNotification(step string, timeoutMS int64, reminder, escalation time.Duration) string {
	var dead []string
	if reminder > 0 && reminder.Milliseconds() >= timeoutMS {
		dead = append(dead, fmt.Sprintf("the reminder (after %s)", reminder))
	}
	if escalation.Milliseconds() >= timeoutMS {
		dead = append(dead, fmt.Sprintf("the escalation (after %s)", escalation))
	}
	if len(dead) == 0 {
		return ""
	}
	return fmt.Sprintf("⚠ dead notification: gate `%s` times out %s after it opened, before %s can be posted; declare reminder_seconds below its timeout_seconds to remind in Slack.",
		step, time.Duration(timeoutMS)*time.Millisecond, strings.Join(dead, " and "))
}
