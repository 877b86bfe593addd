// Package store keeps runs, workflow definitions and their indexes in Redis.
//
// Layout. Runs live in a fixed number of buckets chosen when a store is
// created. Every key of one run, and the indexes of its bucket, share the
// bucket's hash tag, so a single Lua script can change a run, append its
// evidence and update its indexes atomically, and Redis Cluster shards by
// bucket:
//
//	realm:{b<n>}:run:<id>            hash: v (run_version), doc (run JSON), cids
//	realm:{b<n>}:run:<id>:out        hash: step -> output JSON
//	realm:{b<n>}:run:<id>:ev         list: evidence entries (JSON), append-only
//	realm:{b<n>}:idem:<sha256(key)>  string: run id holding an idempotency key
//	realm:{b<n>}:index               zset: run id -> created_at (ms)
//	realm:{b<n>}:<name>              zset: any other index named in a Change
//
// An ended run that owes nothing is packed after a while (packed.go): its
// run hash then holds v, pk (its document, commit ids, outputs and
// evidence, compressed) and g, and its outputs and evidence keys are gone.
// Every read and commit takes either form.
//
// Workflows are not bucketed (they are read far more than written):
//
//	realm:wf:<id>                    hash: latest (newest n), v<n> -> definition JSON,
//	                                       t<n> -> registered_at of v<n> (ms),
//	                                       first (oldest n not pruned), reg
//	realm:workflows                  zset: id -> first registered_at (ms)
//
// The bucket count is fixed when a store is created:
//
//	realm:meta                       hash: buckets
//
// A run's bucket is FNV-1a (32-bit) of its id mod buckets; an idempotency
// key's bucket is that of its sha256 hex, and a run created under a key is
// given an id in the key's bucket (NewRunID), so the create script touches
// one Cluster slot.
//
// What is atomic: one CommitRun call is one script. It refuses the write
// unless the run's stored version equals the version the caller read, so two
// callers racing on one run cannot both win, and a caller holding a stale
// copy is told to reload. Nothing else needs a lock.
//
// Durability is Redis's: a commit is acknowledged once Redis has applied
// it, so the promise that no acknowledged write is lost needs
// `appendonly yes` with `appendfsync always` (`appendfsync everysec` can
// lose about the last second of writes on a crash). The embedded store
// journals and fsyncs every write before it answers (package embedded).
package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned when a run or workflow does not exist.
var ErrNotFound = errors.New("not found")

// ConflictError is returned by CommitRun when the run's stored version is not
// the one the change expected (or, for a create, the run already exists, or
// the idempotency key no longer points where the caller saw it).
type ConflictError struct {
	// Version is the run's stored version (-1 when the run does not exist).
	Version int64
	// KeyHolder is the run id the idempotency key points at, when the
	// conflict is on the key ("" when the key is free).
	KeyHolder string
	// OnKey is true when the conflict is on the idempotency key.
	OnKey bool
}

func (e *ConflictError) Error() string {
	if e.OnKey {
		return "store: idempotency key moved (held by " + e.KeyHolder + ")"
	}
	return "store: run version conflict"
}

// ErrOutcomeUnknown is wrapped by a CommitRun error when the store took the
// change but no answer came back, and sending it again (which is safe: a
// commit is idempotent on its id) got no answer either. The change may
// have landed or not; read the run to know.
var ErrOutcomeUnknown = errors.New("the store did not answer, so whether the write landed is unknown")

// IsConflict reports whether err is a *ConflictError.
func IsConflict(err error) bool {
	_, ok := errors.AsType[*ConflictError](err) // errors.As's target would be allocated on every commit
	return ok
}

// Snapshot is one read of a run: its version, document and step outputs.
type Snapshot struct {
	Version int64
	Doc     []byte
	// Outputs holds each step's recorded output JSON, by step name.
	Outputs map[string][]byte
	// EvidenceLen is the length of the evidence list.
	EvidenceLen int64
}

// The bucket indexes the engine keeps. IndexRuns is the run index every
// run joins when it is created; the others are timers the write path sets
// from the run as each write leaves it.
const (
	IndexRuns     = "index"    // every run, scored by its creation
	IndexClaims   = "claims"   // earliest claim deadline (0: unknown age)
	IndexExpiries = "expiries" // an open gate's expiry with an on_expiry to carry out: the sweeper's work
	// IndexGateDeadlines holds every open gate's time limit, with an
	// on_expiry or not: where the stuck listing finds gates past their time.
	IndexGateDeadlines = "gate_deadlines"
	// IndexOpenGates holds every open run's open gate, scored by when it
	// opened (ms). It is set and cleared by the very write that opens or
	// resolves the gate, so a gates inbox (ListRuns open_gates) pages from
	// it, and notify-svc, scanning it as its outbox, learns of every gate
	// however it was opened, and of its end, with nothing lost between
	// two writes.
	IndexOpenGates  = "open_gates"
	IndexActivity   = "activity"   // last write of an open run
	IndexFinalizers = "finalizers" // an ended run owing cleanup
	IndexBlocked    = "blocked"    // an open run with a capability block
	// IndexPack holds every ended run that owes nothing and is not yet
	// packed (Redis.PackRun), scored by its last write: the packer's work.
	IndexPack = "pack"
)

// IndexOp adds or removes a member of a bucket-level sorted set.
type IndexOp struct {
	// Index names the set (IndexRuns is the run index; others are free).
	Index  string
	Member string
	Score  float64
	Remove bool
}

// Change is one atomic write of a run.
type Change struct {
	RunID string
	// ExpectVersion is the version the caller read; -1 creates the run and
	// fails if it exists.
	ExpectVersion int64
	// NewVersion is stored as the run's version (normally ExpectVersion+1).
	NewVersion int64
	Doc        []byte
	// Outputs are set (HSET) on the run's output hash; a nil value deletes.
	Outputs map[string][]byte
	// Evidence entries are appended in order.
	Evidence [][]byte
	Index    []IndexOp

	// IdemKey, when set, is the idempotency key to point at RunID in the
	// same script. IdemExpect is the run id the key must hold now ("" = the
	// key must be free); otherwise the change is refused with OnKey.
	IdemKey    string
	IdemExpect string
	// IdemTTL bounds how long the key is kept (0 = forever).
	IdemTTL time.Duration

	// CommitID names this change so that sending it twice applies it once
	// (see commitScript). CommitRun sets a fresh random one when it is "";
	// a caller that sets its own makes it 32 lowercase hex characters and
	// uses it for one change only.
	CommitID string
}

// WorkflowRecord is one stored version of a workflow definition.
type WorkflowRecord struct {
	ID           string
	Version      int64 // 1, 2, … per registration
	Definition   []byte
	RegisteredAt time.Time
}

// RunPage is a page of the run index.
type RunPage struct {
	RunIDs []string
	// Next is the cursor for the following page ("" when done).
	Next string
}

// ListFilter selects runs from the index, newest first.
type ListFilter struct {
	Limit  int
	Cursor string
	// Index is the run index paged through, newest score first (default
	// IndexRuns, scored by creation).
	Index string
}

// Store is the run and workflow store. Implementations: Redis (standalone
// or Cluster through redis.UniversalClient) and the embedded in-process
// Redis used on a laptop, which speaks the same protocol.
type Store interface {
	// LoadRun reads a run in one round trip. ErrNotFound if absent.
	LoadRun(ctx context.Context, runID string) (*Snapshot, error)
	// LoadDocs reads many runs' documents in one round trip; nil for an
	// absent one.
	LoadDocs(ctx context.Context, ids []string) ([]*RunDoc, error)
	// CommitRun applies a change atomically, or returns *ConflictError.
	CommitRun(ctx context.Context, c *Change) error
	// Evidence returns entries [start, stop] of a run's evidence (stop -1 = all).
	Evidence(ctx context.Context, runID string, start, stop int64) ([][]byte, error)
	// LookupKey returns the run id an idempotency key points at ("" if none),
	// the key hashed with the bucket rule BucketForKey gives.
	LookupKey(ctx context.Context, key string) (string, error)
	// NewRunID returns a fresh run id (a UUID) that falls in the same bucket
	// as the idempotency key, or any bucket when key is "".
	NewRunID(key string) string
	// ListRuns pages through the run index, newest first.
	ListRuns(ctx context.Context, f ListFilter) (*RunPage, error)
	// Due returns members of a bucket index scored at or below upTo, across
	// every bucket (the timers: "expiries").
	Due(ctx context.Context, index string, upTo float64, limit int) ([]string, error)
	// DueAfter is Due for scores above after (exclusive).
	DueAfter(ctx context.Context, index string, after, upTo float64, limit int) ([]string, error)
	// DeleteRun removes a run, its outputs, evidence and index entries,
	// and its idempotency key (the workflow-scoped key, "" for none) if the
	// key still names it; with expect ≥ 0 only while the run is at that
	// version (else *ConflictError, nothing deleted).
	DeleteRun(ctx context.Context, runID, key string, expect int64) error
	// PackRun stores a run compactly (see Redis.PackRun); true when it
	// packed it, false when it was packed already.
	PackRun(ctx context.Context, runID string) (bool, error)

	// PutWorkflow stores a new version of a definition and returns it;
	// versions past the store's keep limit are pruned with it.
	PutWorkflow(ctx context.Context, id string, definition []byte) (*WorkflowRecord, error)
	// GetWorkflow returns the latest version. ErrNotFound if absent.
	GetWorkflow(ctx context.Context, id string) (*WorkflowRecord, error)
	// GetWorkflowVersion returns one stored version. ErrNotFound if it
	// never was, or was pruned.
	GetWorkflowVersion(ctx context.Context, id string, version int64) (*WorkflowRecord, error)
	// ListWorkflows returns the latest version of every workflow, by id.
	ListWorkflows(ctx context.Context) ([]*WorkflowRecord, error)
	// ListWorkflowsPage is ListWorkflows a page at a time: the workflows
	// after the id `after`, at most limit (0: all), and the next page's
	// `after` ("" at the end).
	ListWorkflowsPage(ctx context.Context, after string, limit int) ([]*WorkflowRecord, string, error)

	// Ping checks the connection.
	Ping(ctx context.Context) error
	Close() error
}
