package webhook

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/trigger"
)

// Mount is one served workflow: its path, its checked trigger and the
// secret its auth reads.
type Mount struct {
	WorkflowID string
	Path       string
	Trigger    *trigger.Trigger
	Secret     []byte
}

// Declared is a workflow's trigger block as found (in a file or in the
// engine's list), not yet checked.
type Declared struct {
	WorkflowID string
	Block      map[string]any
}

// Table maps paths to mounts. A Table is never changed once built.
type Table struct {
	byPath map[string]*Mount
	order  []*Mount
}

// Lookup is the mount at path, or nil.
func (t *Table) Lookup(path string) *Mount {
	if t == nil {
		return nil
	}
	return t.byPath[path]
}

// Mounts are the table's mounts in the order they were declared.
func (t *Table) Mounts() []*Mount {
	if t == nil {
		return nil
	}
	return t.order
}

// Build checks each declared trigger and mounts it (listen spec §3 steps
// 3–4). Problems come back in declaration order with the original's
// wording (without "Error: "); a workflow with a problem is not mounted.
// getenv reads secret_from once, here. loopback says the listener is
// bound to a loopback address only: off loopback a trigger with
// `auth.mode: none` is a problem, never mounted (anyone who reaches the
// port could start its runs).
func Build(decls []Declared, getenv func(string) string, loopback bool) (*Table, []error) {
	t := &Table{byPath: map[string]*Mount{}}
	var problems []error
	for _, d := range decls {
		tr, err := trigger.Parse(d.Block)
		if err != nil {
			problems = append(problems, fmt.Errorf("listen: workflow '%s' has an invalid trigger: Invalid workflow: %v", d.WorkflowID, err))
			continue
		}
		path := tr.MountPath(d.WorkflowID)
		if held := t.byPath[path]; held != nil {
			problems = append(problems, fmt.Errorf("listen: path collision on '%s' — workflow '%s' conflicts with '%s'", path, d.WorkflowID, held.WorkflowID))
			continue
		}
		if tr.Auth.Mode == trigger.ModeNone && !loopback {
			problems = append(problems, fmt.Errorf("listen: workflow '%s' uses auth.mode 'none' on a listener bound to a non-loopback address: path '%s' would start runs for anyone who reaches it; give it a verifying auth.mode, or bind to 127.0.0.1", d.WorkflowID, path))
			continue
		}
		m := &Mount{WorkflowID: d.WorkflowID, Path: path, Trigger: tr}
		if tr.Auth.Mode != trigger.ModeNone {
			secret := getenv(tr.Auth.SecretFrom)
			if secret == "" {
				problems = append(problems, fmt.Errorf("listen: workflow '%s' references secret env var '%s' which is not set", d.WorkflowID, tr.Auth.SecretFrom))
				continue
			}
			m.Secret = []byte(secret)
		}
		t.byPath[path] = m
		t.order = append(t.order, m)
	}
	return t, problems
}

// LogMounts writes the startup lines of a table: the mode-none warning,
// then one `listen: mounted` line per workflow.
func LogMounts(log *Logger, mounts []*Mount) {
	for _, m := range mounts {
		if m.Trigger.Auth.Mode == trigger.ModeNone {
			log.Warn(fmt.Sprintf("listen: workflow '%s' uses auth.mode 'none' — webhook verification is DISABLED for path '%s'. Use only on a trusted network.", m.WorkflowID, m.Path))
		}
	}
	for _, m := range mounts {
		log.Info("listen: mounted", KV{"workflow", m.WorkflowID}, KV{"path", m.Path}, KV{"mode", m.Trigger.Auth.Mode})
	}
}

// Catalog finds the mount for a request path.
type Catalog interface {
	Lookup(ctx context.Context, path string) *Mount
}

// Static is a Catalog that never changes (`realm listen <files>`).
type Static struct{ T *Table }

// Lookup implements Catalog.
func (s Static) Lookup(_ context.Context, path string) *Mount { return s.T.Lookup(path) }

// Engine is a Catalog over the workflows registered with engine-svc: it
// mounts every one whose summary carries a trigger, re-reads the list every
// interval, and at once (at most every MinRefresh) when a request names a
// path it does not know, so a workflow registered later is served without a
// restart.
type Engine struct {
	client realmv1.EngineServiceClient
	getenv func(string) string
	log    *Logger

	// MinRefresh bounds how often an unknown path re-reads the list.
	MinRefresh time.Duration
	// Loopback says the listener is bound to loopback only (Build); set
	// it before the first Refresh. false refuses auth.mode none.
	Loopback bool

	table atomic.Pointer[Table]
	mu    sync.Mutex // one refresh at a time
	last  time.Time
	known map[string]string // path -> "workflow mode", for change logs
	bad   map[string]string // workflow -> problem, logged once
}

// NewEngineCatalog returns an empty catalog; call Refresh (or Run) to fill it.
func NewEngineCatalog(c realmv1.EngineServiceClient, getenv func(string) string, log *Logger) *Engine {
	return &Engine{client: c, getenv: getenv, log: log, MinRefresh: 250 * time.Millisecond, known: map[string]string{}, bad: map[string]string{}}
}

// Table is the current table.
func (e *Engine) Table() *Table { return e.table.Load() }

// Lookup implements Catalog.
func (e *Engine) Lookup(ctx context.Context, path string) *Mount {
	if m := e.table.Load().Lookup(path); m != nil {
		return m
	}
	e.mu.Lock()
	stale := time.Since(e.last) >= e.MinRefresh
	e.mu.Unlock()
	if !stale {
		return nil
	}
	if err := e.Refresh(ctx); err != nil {
		e.log.Error("listen: could not read the registered workflows", KV{"error", err.Error()})
	}
	return e.table.Load().Lookup(path)
}

// Refresh re-reads the registered workflows and swaps the table in.
func (e *Engine) Refresh(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.last = time.Now()
	resp, err := client.ListAllWorkflows(ctx, e.client)
	if err != nil {
		return err
	}
	var decls []Declared
	for _, w := range resp.GetWorkflows() {
		if w.GetTrigger() == nil {
			continue
		}
		decls = append(decls, Declared{WorkflowID: w.GetId(), Block: w.GetTrigger().AsMap()})
	}
	sort.Slice(decls, func(i, j int) bool { return decls[i].WorkflowID < decls[j].WorkflowID })
	t, problems := Build(decls, e.getenv, e.Loopback)
	bad := map[string]string{}
	for _, p := range problems {
		msg := p.Error()
		bad[msg] = msg
		if _, logged := e.bad[msg]; !logged {
			e.log.Error(msg + " — not mounted")
		}
	}
	e.bad = bad
	known := map[string]string{}
	var added []*Mount
	for _, m := range t.Mounts() {
		sig := m.WorkflowID + " " + m.Trigger.Auth.Mode
		known[m.Path] = sig
		if e.known[m.Path] != sig {
			added = append(added, m)
		}
	}
	for path, sig := range e.known {
		if known[path] == "" {
			e.log.Info("listen: unmounted", KV{"path", path}, KV{"was", sig})
		}
	}
	LogMounts(e.log, added)
	e.known = known
	e.table.Store(t)
	return nil
}

// Run refreshes every interval until ctx ends.
func (e *Engine) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := e.Refresh(ctx); err != nil && ctx.Err() == nil {
				e.log.Error("listen: could not read the registered workflows", KV{"error", err.Error()})
			}
		}
	}
}
