package health

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/quote"
	"github.com/realm-go/realm/pkg/workflow"
)

// DefaultIdleThreshold is how long a running run with nothing in progress
// may sit unchanged before never_claimed_idle (run-record spec §11.3).
const DefaultIdleThreshold = 24 * time.Hour

// Input is everything a classification reads. It is read, never changed.
type Input struct {
	Run *record.Run
	// Def is the run's registered workflow; nil when it cannot be read, which
	// is itself the finding definition_unresolvable.
	Def *workflow.Definition
	// DefErr is why Def is nil (nil or STATE_WORKFLOW_NOT_FOUND: not found;
	// another errcode: unreadable).
	DefErr error
	Now    time.Time
	// Capable reports whether this server can run a handler. Nil means
	// nothing beyond the built-ins: every recorded capability block stands,
	// which is how inspect and `list --stuck` judge (from the record alone).
	Capable func(handler string) bool
	// Entries is the run's evidence, oldest first, when the caller has it.
	// Without it structured_output_downgraded cannot be found.
	Entries []*record.Entry
	// IdleThreshold overrides DefaultIdleThreshold (`list --stuck
	// --older-than`); a pointer because 0 is meaningful: every idle run.
	IdleThreshold *time.Duration
	// DriveFailures is the run's drive_failures record. It stands in until
	// record.Run carries the field itself (see DriveFailures).
	DriveFailures *DriveFailures
}

// DriveFailures is the drive_failures record (run-record spec §4.7,
// agent-driver spec §12.2): the last 5 failures, oldest first.
type DriveFailures = record.DriveFailures

// DriveFailure is one failed drive by `realm agent`.
type DriveFailure = record.DriveFailure

// Finding is one health finding. Kind and Reason are always set; Step,
// Since and Evidence where they apply; IdleMS only on never_claimed_idle,
// which carries it beside evidence (the seed's example).
type Finding struct {
	Kind     string
	Step     string
	Reason   string
	Since    *time.Time
	IdleMS   *int64
	Evidence map[string]any
}

// MarshalJSON writes the seed's shape: kind, step, reason, since, idle_ms,
// evidence, the optional ones left out when unset, times as the record
// writes them.
func (f Finding) MarshalJSON() ([]byte, error) {
	w := wireFinding{Kind: f.Kind, Step: f.Step, Reason: f.Reason, IdleMS: f.IdleMS, Evidence: f.Evidence}
	if f.Since != nil {
		w.Since = record.FormatTime(*f.Since)
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *Finding) UnmarshalJSON(b []byte) error {
	var w wireFinding
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*f = Finding{Kind: w.Kind, Step: w.Step, Reason: w.Reason, IdleMS: w.IdleMS, Evidence: w.Evidence}
	if t := record.ParseTime(w.Since); !t.IsZero() {
		f.Since = &t
	}
	return nil
}

type wireFinding struct {
	Kind     string         `json:"kind"`
	Step     string         `json:"step,omitempty"`
	Reason   string         `json:"reason"`
	Since    string         `json:"since,omitempty"`
	IdleMS   *int64         `json:"idle_ms,omitempty"`
	Evidence map[string]any `json:"evidence,omitempty"`
}

// Classify returns the run's findings in catalogue order, and within a
// kind in step order. Findings about open runs are looked for only while
// the run is open, those about ended runs only once it has ended;
// structured_output_downgraded on both. A nil run has none.
func Classify(in Input) []Finding {
	return classify(in, false)
}

// classify runs the catalogue. listing is `list --stuck`'s view: no
// workflow is read, so the two findings that need one are not looked for.
func classify(in Input, listing bool) []Finding {
	if in.Run == nil {
		return nil
	}
	c := &classifier{in: in, run: in.Run, now: in.Now, ended: in.Run.Terminal()}
	var out []Finding
	for _, e := range catalogue {
		switch {
		case e.scope == openRuns && c.ended, e.scope == endedRuns && !c.ended:
			continue
		case listing && e.needsDef:
			continue
		}
		out = append(out, e.find(c)...)
	}
	return out
}

// classifier holds one classification's input.
type classifier struct {
	in    Input
	run   *record.Run
	now   time.Time
	ended bool
}

// builtins are the handlers every server has (engine dispatch.go keeps the
// same list for running them).
var builtins = map[string]bool{quote.HandlerName: true}

func (c *classifier) capable(handler string) bool {
	if builtins[handler] {
		return true
	}
	return c.in.Capable != nil && c.in.Capable(handler)
}

func (c *classifier) idleThreshold() time.Duration {
	if c.in.IdleThreshold != nil {
		return *c.in.IdleThreshold
	}
	return DefaultIdleThreshold
}

// ordered sorts step names into the workflow's file order; names the
// workflow does not have (or all, without one) keep their given order
// after those it has.
func (c *classifier) ordered(names []string) []string {
	out := slices.Clone(names)
	if c.in.Def == nil {
		return out
	}
	pos := make(map[string]int, len(c.in.Def.StepOrder))
	for i, n := range c.in.Def.StepOrder {
		pos[n] = i
	}
	rank := func(n string) int {
		if i, ok := pos[n]; ok {
			return i
		}
		return len(pos)
	}
	slices.SortStableFunc(out, func(a, b string) int { return rank(a) - rank(b) })
	return out
}

// sortedKeys gives a map's keys by name, then in file order.
func sortedKeys[V any](c *classifier, m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return c.ordered(keys)
}

func ptr[T any](v T) *T { return &v }
