package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// ErrInvalid wraps every refusal of a malformed argument (empty run id, a
// change that does not raise the version, …). It is never a conflict.
var ErrInvalid = errors.New("store: invalid argument")

// ErrBucketMismatch is returned when a store is opened with a bucket count
// other than the one persisted when the store was created: run keys would
// hash to different buckets and every existing run would vanish.
var ErrBucketMismatch = errors.New("store: bucket count differs from the stored one")

// DefaultBuckets is the bucket count of a new store when Options leaves it 0.
const DefaultBuckets = 256

// MaxBuckets bounds Options.Buckets; Redis Cluster has 16384 slots, so more
// buckets than that cannot spread any further.
const MaxBuckets = 16384

// loadAttempts is how many reads LoadRun makes of a run that keeps changing
// under it; the last one is atomic (MULTI/EXEC).
const loadAttempts = 3

// Options configure a Redis store.
type Options struct {
	// Buckets is the number of run buckets (default 256). It is fixed when a
	// store is created: the first use persists it at <Prefix>:meta, and a
	// store opened later with a different count is refused.
	Buckets int
	// Prefix starts every key (default "realm").
	Prefix string
	// IdemTTL is the default lifetime of an idempotency key whose Change
	// leaves IdemTTL 0. Zero keeps keys forever; a negative Change.IdemTTL
	// keeps that key forever whatever the default.
	IdemTTL time.Duration
	// RunIndexes names the bucket indexes whose members are run ids;
	// DeleteRun removes the run from each. "index" is always included.
	RunIndexes []string
	// Counter, when set, is installed as a hook on the client so callers
	// can count round trips (see RoundTripCounter).
	Counter *RoundTripCounter
	// Now is the clock for workflow registration times (default time.Now).
	Now func() time.Time
	// WaitReplicas, when above 0, acknowledges a commit only once WAIT has
	// seen that many replicas receive it, so a failover does not lose it.
	// A commit fewer replicas confirm is written on the master but
	// returned as an error.
	WaitReplicas int
	// WaitTimeout bounds each WAIT (default DefaultWaitTimeout).
	WaitTimeout time.Duration
	// KeepWorkflowVersions is how many versions of each workflow are kept
	// (the newest); a put deletes older ones. 0 means
	// DefaultKeepWorkflowVersions, below 0 keeps every version.
	KeepWorkflowVersions int
	// SettleTimeout bounds how long a commit that got no answer is sent
	// again before CommitRun gives up with ErrOutcomeUnknown (default
	// DefaultSettleTimeout).
	SettleTimeout time.Duration
	// PipelineCommits sends concurrent commits together, one pipeline of
	// commit scripts per round trip (see commitPipe). engine-svc sets it
	// on Redis and on the embedded store, where the replies of a pipeline
	// share an fsync.
	PipelineCommits bool
}

// DefaultSettleTimeout is Options.SettleTimeout when it is 0.
const DefaultSettleTimeout = 2 * time.Second

// DefaultWaitTimeout is how long a commit waits for its replicas when
// Options.WaitTimeout is 0.
const DefaultWaitTimeout = time.Second

// Redis is the Store on Redis (standalone, Sentinel or Cluster through
// redis.UniversalClient, or the embedded server). It owns the client: Close
// closes it.
type Redis struct {
	c          redis.UniversalClient
	buckets    int
	prefix     string
	idemTTL    time.Duration
	runIndexes []string
	counter    *RoundTripCounter
	now        func() time.Time
	waitN      int
	waitFor    time.Duration
	settleFor  time.Duration
	settles    atomic.Int64 // commits that got no answer at first
	// pipe batches concurrent commits (Options.PipelineCommits); nil sends
	// each on its own.
	pipe *commitPipe
	// keepVersions is putWorkflowScript's ARGV[4] (0: keep all).
	keepVersions int

	metaMu  sync.Mutex
	metaOK  bool
	metaErr error // permanent (mismatch or corrupt meta); network errors are retried

	// bucketKeys caches, per bucket, the keys of the run indexes (every
	// commit names them), built on first use: [tag, runIndexes' keys...].
	bucketKeys []atomic.Pointer[[]string]
}

var _ Store = (*Redis)(nil)

// NewRedis returns a store on client. It does no I/O: the bucket count is
// checked on first use (or by Check).
func NewRedis(client redis.UniversalClient, opts Options) *Redis {
	r := &Redis{
		c:         client,
		buckets:   opts.Buckets,
		prefix:    opts.Prefix,
		idemTTL:   opts.IdemTTL,
		counter:   opts.Counter,
		now:       opts.Now,
		waitN:     opts.WaitReplicas,
		waitFor:   opts.WaitTimeout,
		settleFor: opts.SettleTimeout,
	}
	if opts.PipelineCommits {
		r.pipe = &commitPipe{c: client}
	}
	if r.settleFor <= 0 {
		r.settleFor = DefaultSettleTimeout
	}
	switch k := opts.KeepWorkflowVersions; {
	case k == 0:
		r.keepVersions = DefaultKeepWorkflowVersions
	case k > 0:
		r.keepVersions = k
	}
	if r.waitFor <= 0 {
		r.waitFor = DefaultWaitTimeout
	}
	if r.buckets <= 0 {
		r.buckets = DefaultBuckets
	}
	if r.prefix == "" {
		r.prefix = "realm"
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.runIndexes = []string{IndexRuns, IndexExpiries, IndexClaims, IndexActivity, IndexFinalizers, IndexBlocked, IndexGateDeadlines, IndexOpenGates, IndexPack}
	for _, ix := range opts.RunIndexes {
		if ix != IndexRuns && validName(ix) == nil {
			r.runIndexes = append(r.runIndexes, ix)
		}
	}
	if r.buckets > MaxBuckets {
		r.metaErr = fmt.Errorf("%w: %d buckets (max %d)", ErrInvalid, r.buckets, MaxBuckets)
	} else {
		r.bucketKeys = make([]atomic.Pointer[[]string], r.buckets)
	}
	if r.counter != nil {
		client.AddHook(r.counter)
	}
	return r
}

// Buckets returns the store's bucket count.
func (r *Redis) Buckets() int { return r.buckets }

// Prefix returns the key prefix.
func (r *Redis) Prefix() string { return r.prefix }

// Client returns the underlying client (for benchmarks and tools).
func (r *Redis) Client() redis.UniversalClient { return r.c }

// Settles returns how many commits got no answer at first and were settled
// by sending them again (or gave up with ErrOutcomeUnknown).
func (r *Redis) Settles() int64 { return r.settles.Load() }

// Counter returns the round-trip counter installed by Options.Counter, or nil.
func (r *Redis) Counter() *RoundTripCounter { return r.counter }

// Check persists or verifies the bucket count and loads the scripts, so the
// first real call costs exactly its own round trip. Calling it is optional:
// every operation checks the bucket count on first use.
func (r *Redis) Check(ctx context.Context) error {
	if err := r.ensureMeta(ctx); err != nil {
		return err
	}
	for _, s := range []*redis.Script{commitScript, deleteScript, putWorkflowScript} {
		if err := s.Load(ctx, r.c).Err(); err != nil {
			return fmt.Errorf("store: load script: %w", err)
		}
	}
	return nil
}

// ensureMeta persists the bucket count on first use, or refuses a store
// whose persisted count differs.
func (r *Redis) ensureMeta(ctx context.Context) error {
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	if r.metaErr != nil {
		return r.metaErr
	}
	if r.metaOK {
		return nil
	}
	key := r.prefix + ":meta"
	var got *redis.StringCmd
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, key, "buckets", r.buckets)
		got = p.HGet(ctx, key, "buckets")
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: read %s: %w", key, err)
	}
	n, err := strconv.Atoi(got.Val())
	if err != nil {
		r.metaErr = fmt.Errorf("store: %s buckets is %q, not a number", key, got.Val())
		return r.metaErr
	}
	if n != r.buckets {
		r.metaErr = fmt.Errorf("%w: %s says %d, opened with %d", ErrBucketMismatch, key, n, r.buckets)
		return r.metaErr
	}
	r.metaOK = true
	return nil
}

// Bucket returns the bucket of a run id: FNV-1a (32-bit) of the id mod buckets.
func Bucket(runID string, buckets int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(runID))
	return int(h.Sum32() % uint32(buckets))
}

// KeyHash is the hex SHA-256 of an idempotency key, as it appears in the
// key's Redis name.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// BucketForKey returns the bucket of an idempotency key: FNV-1a of its
// KeyHash mod buckets.
func BucketForKey(key string, buckets int) int {
	return Bucket(KeyHash(key), buckets)
}

// BucketOf returns the bucket of a run id in this store.
func (r *Redis) BucketOf(runID string) int { return Bucket(runID, r.buckets) }

// BucketForKey returns the bucket of an idempotency key in this store.
func (r *Redis) BucketForKey(key string) int { return BucketForKey(key, r.buckets) }

func (r *Redis) tag(bucket int) string {
	if keys := r.keysOf(bucket); keys != nil {
		return keys[0]
	}
	return r.prefix + ":{b" + strconv.Itoa(bucket) + "}:"
}

// keysOf is a bucket's cached tag and run-index keys, nil for a bucket out
// of range. Two callers may build the same slice at once; either is kept.
func (r *Redis) keysOf(bucket int) []string {
	if bucket < 0 || bucket >= len(r.bucketKeys) {
		return nil
	}
	if p := r.bucketKeys[bucket].Load(); p != nil {
		return *p
	}
	tag := r.prefix + ":{b" + strconv.Itoa(bucket) + "}:"
	keys := make([]string, 0, 1+len(r.runIndexes))
	keys = append(keys, tag)
	for _, ix := range r.runIndexes {
		keys = append(keys, tag+ix)
	}
	r.bucketKeys[bucket].Store(&keys)
	return keys
}

// runKeyPrefix follows a bucket's tag in a run's key; the walks read run
// ids back from keys by it.
const runKeyPrefix = "run:"

// RunKey is the hash holding a run's version and document.
func (r *Redis) RunKey(runID string) string { return r.tag(r.BucketOf(runID)) + runKeyPrefix + runID }

// A run's outputs hash and evidence list are its run key with these
// suffixes.
const (
	outputsSuffix  = ":out"
	evidenceSuffix = ":ev"
)

// OutputsKey is the hash of a run's step outputs.
func (r *Redis) OutputsKey(runID string) string { return r.RunKey(runID) + outputsSuffix }

// EvidenceKey is the list of a run's evidence entries.
func (r *Redis) EvidenceKey(runID string) string { return r.RunKey(runID) + evidenceSuffix }

// runKeys are a run's three keys, cut from one string (a commit names all
// three): the run key is the outputs key's prefix.
func (r *Redis) runKeys(runID string) (run, outputs, evidence string) {
	tag := r.tag(r.BucketOf(runID))
	all := tag + runKeyPrefix + runID + outputsSuffix + tag + runKeyPrefix + runID + evidenceSuffix
	n := len(tag) + len(runKeyPrefix) + len(runID)
	return all[:n], all[:n+len(outputsSuffix)], all[n+len(outputsSuffix):]
}

// IdemKeyName is the string holding the run id an idempotency key points at.
func (r *Redis) IdemKeyName(key string) string {
	h := KeyHash(key)
	return r.tag(Bucket(h, r.buckets)) + "idem:" + h
}

// IndexKey is a bucket's sorted set called name.
func (r *Redis) IndexKey(bucket int, name string) string {
	if keys := r.keysOf(bucket); keys != nil {
		for i, ix := range r.runIndexes {
			if ix == name {
				return keys[1+i]
			}
		}
		return keys[0] + name
	}
	return r.tag(bucket) + name
}

func (r *Redis) wfKey(id string) string { return r.prefix + ":wf:" + id }
func (r *Redis) wfSetKey() string       { return r.prefix + ":workflows" }

// validRunID refuses ids that would break the key layout: a ':' would let
// one run's id name another run's outputs or evidence key.
func validRunID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty run id", ErrInvalid)
	}
	if strings.ContainsAny(id, ":{}") {
		return fmt.Errorf("%w: run id %q contains ':', '{' or '}'", ErrInvalid, id)
	}
	return nil
}

func validName(name string) error {
	if name == "" || strings.ContainsAny(name, ":{}") {
		return fmt.Errorf("%w: index name %q is empty or contains ':', '{' or '}'", ErrInvalid, name)
	}
	return nil
}

// NewRunID returns a random UUID v4. With a key it draws until the id falls
// in the key's bucket (about Buckets draws), so the create script's keys
// share one Cluster slot.
func (r *Redis) NewRunID(key string) string {
	if key == "" {
		return uuid.NewString()
	}
	want := r.BucketForKey(key)
	for {
		id := uuid.NewString()
		if r.BucketOf(id) == want {
			return id
		}
	}
}

// LoadRun reads a run's version, document, outputs and evidence length in
// one pipelined round trip. The pipeline reads the version first and last;
// since every commit raises it, equal versions prove no commit interleaved
// (a seqlock). When a hot writer keeps moving the run, the last attempt
// reads inside MULTI/EXEC instead, which cannot tear and so always ends.
// (Not MULTI every time: the embedded server counts EXEC as a write and
// would snapshot after every read.)
func (r *Redis) LoadRun(ctx context.Context, runID string) (*Snapshot, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		snap, err := r.loadOnce(ctx, runID, attempt == loadAttempts)
		if errors.Is(err, errTorn) {
			continue
		}
		return snap, err
	}
}

var errTorn = errors.New("store: run changed during the read")

// pipelined sends read's commands in one round trip, inside MULTI/EXEC
// when atomic. A missing key or field (redis.Nil) is not an error: each
// command's value says so.
func (r *Redis) pipelined(ctx context.Context, atomic bool, read func(redis.Pipeliner) error) error {
	var err error
	if atomic {
		_, err = r.c.TxPipelined(ctx, read)
	} else {
		_, err = r.c.Pipelined(ctx, read)
	}
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

func (r *Redis) loadOnce(ctx context.Context, runID string, atomic bool) (*Snapshot, error) {
	runKey := r.RunKey(runID)
	var (
		head *redis.SliceCmd
		outs *redis.MapStringStringCmd
		evn  *redis.IntCmd
		tail *redis.SliceCmd
	)
	read := func(p redis.Pipeliner) error {
		head = p.HMGet(ctx, runKey, "v", "doc", packField, genField)
		outs = p.HGetAll(ctx, runKey+outputsSuffix)
		evn = p.LLen(ctx, runKey+evidenceSuffix)
		tail = p.HMGet(ctx, runKey, "v", genField)
		return nil
	}
	if err := r.pipelined(ctx, atomic, read); err != nil {
		return nil, fmt.Errorf("store: load run %s: %w", runID, err)
	}
	vals := head.Val()
	if len(vals) != 4 || vals[0] == nil {
		return nil, ErrNotFound
	}
	vs, _ := vals[0].(string)
	if t := tail.Val(); len(t) != 2 || t[0] != vals[0] || t[1] != vals[3] {
		if atomic {
			return nil, fmt.Errorf("store: load run %s: version moved inside MULTI", runID)
		}
		return nil, errTorn
	}
	v, err := strconv.ParseInt(vs, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("store: run %s has version %q, not a number", runID, vs)
	}
	if pk, ok := vals[2].(string); ok && vals[1] == nil {
		// Packed: the hash's pk holds everything; the other keys are gone.
		p, err := decodePacked([]byte(pk), false)
		if err != nil {
			return nil, fmt.Errorf("store: run %s: %w", runID, err)
		}
		return &Snapshot{Version: v, Doc: p.doc, Outputs: p.outputs, EvidenceLen: int64(len(p.evidence))}, nil
	}
	doc, _ := vals[1].(string)
	snap := &Snapshot{
		Version:     v,
		Doc:         []byte(doc),
		Outputs:     make(map[string][]byte, len(outs.Val())),
		EvidenceLen: evn.Val(),
	}
	for k, o := range outs.Val() {
		snap.Outputs[k] = []byte(o)
	}
	return snap, nil
}

// RunDoc is a run's version and document, without its outputs and
// evidence: what a listing reads.
type RunDoc struct {
	Version int64
	Doc     []byte
	// Packed is whether the run is stored packed (PackRun).
	Packed bool
}

// LoadDocs reads many runs' documents in one pipelined round trip (a page
// of `run list`): docs[i] is ids[i]'s, nil where the run is absent.
func (r *Redis) LoadDocs(ctx context.Context, ids []string) ([]*RunDoc, error) {
	for _, id := range ids {
		if err := validRunID(id); err != nil {
			return nil, err
		}
	}
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	return r.loadDocs(ctx, ids)
}

// loadDocs is LoadDocs of ids known to be run ids.
func (r *Redis) loadDocs(ctx context.Context, ids []string) ([]*RunDoc, error) {
	reads := make([]*redis.SliceCmd, len(ids))
	if _, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			reads[i] = p.HMGet(ctx, r.RunKey(id), "v", "doc", packField)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: load %d runs: %w", len(ids), err)
	}
	docs := make([]*RunDoc, len(ids))
	for i, id := range ids {
		vals := reads[i].Val()
		if len(vals) != 3 || vals[0] == nil {
			continue
		}
		vs, _ := vals[0].(string)
		v, err := strconv.ParseInt(vs, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("store: run %s has version %q, not a number", id, vs)
		}
		if pk, ok := vals[2].(string); ok && vals[1] == nil {
			p, err := decodePacked([]byte(pk), true)
			if err != nil {
				return nil, fmt.Errorf("store: run %s: %w", id, err)
			}
			docs[i] = &RunDoc{Version: v, Doc: p.doc, Packed: true}
			continue
		}
		doc, _ := vals[1].(string)
		docs[i] = &RunDoc{Version: v, Doc: []byte(doc)}
	}
	return docs, nil
}

// CommitRun applies c in one script (one round trip once the script is
// cached), or returns *ConflictError.
func (r *Redis) CommitRun(ctx context.Context, c *Change) error {
	if c == nil {
		return fmt.Errorf("%w: nil change", ErrInvalid)
	}
	if err := validRunID(c.RunID); err != nil {
		return err
	}
	if c.ExpectVersion < -1 {
		return fmt.Errorf("%w: expect version %d", ErrInvalid, c.ExpectVersion)
	}
	// LoadRun's consistency check relies on versions only ever rising.
	if c.NewVersion <= c.ExpectVersion {
		return fmt.Errorf("%w: new version %d does not rise above %d", ErrInvalid, c.NewVersion, c.ExpectVersion)
	}
	if c.Doc == nil {
		return fmt.Errorf("%w: run %s: nil document", ErrInvalid, c.RunID)
	}
	bucket := r.BucketOf(c.RunID)
	if c.IdemKey != "" && r.BucketForKey(c.IdemKey) != bucket {
		return fmt.Errorf("%w: run %s is not in its idempotency key's bucket (use NewRunID(key))", ErrInvalid, c.RunID)
	}
	if err := r.ensureMeta(ctx); err != nil {
		return err
	}

	if c.CommitID != "" && (len(c.CommitID) != commitIDLen || strings.Trim(c.CommitID, "0123456789abcdef") != "") {
		return fmt.Errorf("%w: commit id %q is not %d lowercase hex characters", ErrInvalid, c.CommitID, commitIDLen)
	}

	// The EVALSHA command is built whole, in one slice (commandArgs): its
	// arguments are neither gathered in pieces nor copied again by the
	// client.
	nKeys := 3 + len(c.Index)
	if c.IdemKey != "" {
		nKeys++
	}
	nSets, nDels := 0, 0
	for _, out := range c.Outputs {
		if out == nil {
			nDels++
		} else {
			nSets++
		}
	}
	nStr := nKeys + 5 + 2*nSets + nDels + len(c.Index)
	a := newCommandArgs(3+nKeys+12+2*nSets+nDels+len(c.Evidence)+3*len(c.Index), nStr, 2+nSets+len(c.Evidence), 2, len(c.Index))
	runKey, outKey, evKey := r.runKeys(c.RunID)
	a.lit("evalsha")
	a.lit(commitHash)
	a.lit(nKeys)
	a.str(runKey)
	a.str(outKey)
	a.str(evKey)
	for _, op := range c.Index {
		if err := validName(op.Index); err != nil {
			return err
		}
		if !op.Remove && op.Score != op.Score { // NaN: Redis would refuse it mid-script
			return fmt.Errorf("%w: index %s score is NaN", ErrInvalid, op.Index)
		}
		a.str(r.IndexKey(bucket, op.Index))
	}
	idemOn, ttlMS := "0", "0"
	if c.IdemKey != "" {
		idemOn = "1"
		a.str(r.IdemKeyName(c.IdemKey))
		ttl := c.IdemTTL
		if ttl == 0 {
			ttl = r.idemTTL
		}
		if ttl > 0 {
			ttlMS = strconv.FormatInt(max(ttl.Milliseconds(), 1), 10)
		}
	}
	a.int64(c.ExpectVersion)
	a.int64(c.NewVersion)
	a.raw(c.Doc)
	a.str(idemOn)
	a.str(c.IdemExpect)
	a.str(c.RunID)
	a.str(ttlMS)
	a.lit(nSets)
	a.lit(nDels)
	a.lit(len(c.Evidence))
	a.lit(len(c.Index))
	if c.CommitID != "" {
		a.str(c.CommitID)
	} else {
		fillCommitID(&a.commitID) // in the arguments: no string of its own
		a.raw(a.commitID[:])
	}
	for step, out := range c.Outputs {
		if out != nil {
			a.str(step)
			a.raw(out)
		}
	}
	for step, out := range c.Outputs {
		if out == nil {
			a.str(step)
		}
	}
	for _, e := range c.Evidence {
		a.raw(e)
	}
	for _, op := range c.Index {
		if op.Remove {
			a.lit("r")
			a.lit("0")
		} else {
			a.lit("a")
			a.float64(op.Score)
		}
		a.str(op.Member)
	}
	cmd := a.v

	for attempt := 1; ; attempt++ {
		err := r.sendCommit(ctx, c.RunID, runKey, cmd)
		if !errors.Is(err, errPacked) || attempt == 3 {
			return err
		}
		if err := r.unpack(ctx, c.RunID); err != nil {
			return err
		}
	}
}

// sendCommit sends a built commit until it is answered (settle).
func (r *Redis) sendCommit(ctx context.Context, runID, runKey string, cmd []any) error {
	if r.waitN > 0 {
		return r.settle(ctx, runID, func(ctx context.Context) error {
			return r.commitWaiting(ctx, runID, runKey, cmd)
		})
	}
	return r.settle(ctx, runID, func(ctx context.Context) error {
		var res any
		var err error
		if r.pipe != nil {
			res, err = r.pipe.run(ctx, cmd)
		} else {
			res, err = evalCommit(ctx, r.c, cmd)
		}
		if err != nil {
			return sendError(runID, err)
		}
		return commitResult(runID, res)
	})
}

// commitHash is the commit script's SHA1, boxed once for every EVALSHA.
var commitHash any = commitScript.Hash()

// evalCommit sends a commit built as EVALSHA and, when the server has lost
// the script (a restart, a SCRIPT FLUSH), again as EVAL with its body.
func evalCommit(ctx context.Context, c redis.UniversalClient, evalsha []any) (any, error) {
	res, err := c.Do(ctx, evalsha...).Result()
	if isNoScript(err) {
		res, err = c.Do(ctx, asEval(evalsha)...).Result()
	}
	return res, err
}

// asEval is an EVALSHA command as EVAL of the commit script.
func asEval(evalsha []any) []any {
	eval := slices.Clone(evalsha)
	eval[0], eval[1] = "eval", commitSource
	return eval
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// uncertainError is a commit that was, or may have been, sent but got no
// answer: a timeout, a dropped connection, a cancelled wait.
type uncertainError struct{ err error }

func (e *uncertainError) Error() string { return e.err.Error() }
func (e *uncertainError) Unwrap() error { return e.err }

// sendError sorts a failed send of the commit script: an error reply from
// Redis is an answer (the script did not run, or ran and refused), and so is
// a commit withdrawn before it was sent; anything else leaves the outcome
// open.
func sendError(runID string, err error) error {
	err = fmt.Errorf("store: commit run %s: %w", runID, err)
	var reply redis.Error
	var unsent *notSentError
	if errors.As(err, &reply) || errors.As(err, &unsent) {
		return err
	}
	return &uncertainError{err}
}

// settle sends a commit and, when no answer comes back, sends the same
// commit again until one does: the script is idempotent on the commit id,
// so the answer to a repeat is the truth about the first (landed: 1;
// not landed and overtaken: a conflict; not landed: it lands now). The
// repeats run on their own deadline even when the caller's has passed, so
// a caller that gave up never leaves a write half-known. Without any answer
// within SettleTimeout the error wraps ErrOutcomeUnknown.
func (r *Redis) settle(ctx context.Context, runID string, send func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: commit run %s: not sent: %w", runID, err)
	}
	err := send(ctx)
	open, ok := errors.AsType[*uncertainError](err) // errors.As would move open to the heap on every commit
	if !ok {
		return err
	}
	r.settles.Add(1)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.settleFor)
	defer cancel()
	delay := 10 * time.Millisecond
	for {
		select {
		case <-sctx.Done():
			return fmt.Errorf("store: commit run %s: %w: %w", runID, ErrOutcomeUnknown, open.err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
		err := send(sctx)
		again, ok := errors.AsType[*uncertainError](err)
		if !ok {
			return err
		}
		open = again
	}
}

// commitWaiting runs the commit script and WAIT in one pipeline: WAIT
// counts the replicas that have the writes of its own connection, so both
// must go over the same one, to the master of the run's slot.
func (r *Redis) commitWaiting(ctx context.Context, runID, runKey string, evalsha []any) error {
	var node *redis.Client
	switch c := r.c.(type) {
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, runKey)
		if err != nil {
			return sendError(runID, fmt.Errorf("master of its slot: %w", err))
		}
		node = m
	case *redis.Client: // standalone or Sentinel's failover client
		node = c
	default:
		return fmt.Errorf("store: commit run %s: --redis-wait-replicas needs a standalone, Sentinel or Cluster client, not %T", runID, r.c)
	}
	for attempt := 0; ; attempt++ {
		pipe := node.Pipeline()
		script := pipe.Do(ctx, evalsha...)
		wait := pipe.Do(ctx, "wait", r.waitN, r.waitFor.Milliseconds())
		_, _ = pipe.Exec(ctx) // each command's own error is read below
		if err := script.Err(); err != nil {
			if attempt == 0 && isNoScript(err) {
				if err := commitScript.Load(ctx, node).Err(); err != nil {
					return sendError(runID, fmt.Errorf("load script: %w", err))
				}
				continue
			}
			return sendError(runID, err)
		}
		res, err := script.Result()
		if err != nil {
			return fmt.Errorf("store: commit run %s: %w", runID, err)
		}
		if err := commitResult(runID, res); err != nil {
			return err // a conflict wrote nothing: no replica to wait for
		}
		n, err := wait.Int64()
		if err != nil {
			return fmt.Errorf("store: commit run %s: written on the master, but WAIT failed, so a failover could lose it: %w", runID, err)
		}
		if n < int64(r.waitN) {
			return fmt.Errorf("store: commit run %s: written on the master, but only %d of the %d replicas required (--redis-wait-replicas) acknowledged it within %s, so a failover could lose it", runID, n, r.waitN, r.waitFor)
		}
		return nil
	}
}

// newCommitID returns 16 random bytes in hex.
func newCommitID() string {
	var h [commitIDLen]byte
	fillCommitID(&h)
	return string(h[:])
}

// fillCommitID writes 16 random bytes in hex into h.
func fillCommitID(h *[commitIDLen]byte) {
	var b [commitIDLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	hex.Encode(h[:], b[:])
}

// commitResult turns the commit script's reply into nil or a conflict.
func commitResult(runID string, reply any) error {
	if code, ok := reply.(int64); ok && code == 1 {
		return nil
	}
	res, _ := reply.([]any)
	if len(res) == 0 {
		return fmt.Errorf("store: commit run %s: unexpected script reply %v", runID, reply)
	}
	code, _ := res[0].(int64)
	switch {
	case code == 0 && len(res) == 2:
		v, err := parseVersion(res[1])
		if err != nil {
			return fmt.Errorf("store: commit run %s: %w", runID, err)
		}
		return &ConflictError{Version: v}
	case code == 3:
		return errPacked
	case code == 2 && len(res) == 3:
		holder, _ := res[1].(string)
		v, err := parseVersion(res[2])
		if err != nil {
			return fmt.Errorf("store: commit run %s: %w", runID, err)
		}
		return &ConflictError{Version: v, KeyHolder: holder, OnKey: true}
	}
	return fmt.Errorf("store: commit run %s: unexpected script reply %v", runID, res)
}

func parseVersion(x any) (int64, error) {
	s, _ := x.(string)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stored version %q is not a number", s)
	}
	return v, nil
}

// Evidence returns entries [start, stop] (LRANGE semantics, stop -1 = all).
// ErrNotFound if the run does not exist.
func (r *Redis) Evidence(ctx context.Context, runID string, start, stop int64) ([][]byte, error) {
	if err := validRunID(runID); err != nil {
		return nil, err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return nil, err
	}
	runKey := r.RunKey(runID)
	for attempt := 1; ; attempt++ {
		out, err := r.evidenceOnce(ctx, runID, runKey, start, stop, attempt == loadAttempts)
		if errors.Is(err, errTorn) {
			continue
		}
		return out, err
	}
}

// evidenceOnce is one read of Evidence: the run's head and tail fields
// around the list, as in loadOnce (a pack or unpack between them would
// hide the list; evidence is only ever appended, so a commit may).
func (r *Redis) evidenceOnce(ctx context.Context, runID, runKey string, start, stop int64, atomic bool) ([][]byte, error) {
	var (
		head *redis.SliceCmd
		rng  *redis.StringSliceCmd
		tail *redis.StringCmd
	)
	read := func(p redis.Pipeliner) error {
		head = p.HMGet(ctx, runKey, "v", packField, genField)
		rng = p.LRange(ctx, runKey+evidenceSuffix, start, stop)
		tail = p.HGet(ctx, runKey, genField)
		return nil
	}
	if err := r.pipelined(ctx, atomic, read); err != nil {
		return nil, fmt.Errorf("store: evidence of %s: %w", runID, err)
	}
	vals := head.Val()
	if len(vals) != 3 || vals[0] == nil {
		return nil, ErrNotFound
	}
	if pk, ok := vals[1].(string); ok {
		p, err := decodePacked([]byte(pk), false)
		if err != nil {
			return nil, fmt.Errorf("store: evidence of %s: %w", runID, err)
		}
		return lrange(p.evidence, start, stop), nil
	}
	if g, _ := vals[2].(string); tail.Val() != g {
		if atomic {
			return nil, fmt.Errorf("store: evidence of %s: packed inside MULTI", runID)
		}
		return nil, errTorn
	}
	out := make([][]byte, len(rng.Val()))
	for i, e := range rng.Val() {
		out[i] = []byte(e)
	}
	return out, nil
}

// LookupKey returns the run id an idempotency key points at, "" if none.
func (r *Redis) LookupKey(ctx context.Context, key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty idempotency key", ErrInvalid)
	}
	if err := r.ensureMeta(ctx); err != nil {
		return "", err
	}
	v, err := r.c.Get(ctx, r.IdemKeyName(key)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: lookup key: %w", err)
	}
	return v, nil
}

// DeleteRun removes a run's keys, its entries in Options.RunIndexes and its
// idempotency key (if key is set and still names the run) in one script:
// a keyed run's id is minted in its key's bucket (NewRunID), so they share
// a Cluster slot. A key in another bucket (a run keyed by hand) is left for
// `realm run gc`. ErrNotFound if the run does not exist. With expect at 0
// or above, the run is deleted only at that version: a run written since
// (resumed, answered) is left whole and *ConflictError returned.
func (r *Redis) DeleteRun(ctx context.Context, runID, key string, expect int64) error {
	if err := validRunID(runID); err != nil {
		return err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return err
	}
	runKey, outKey, evKey := r.runKeys(runID)
	bucket := r.BucketOf(runID)
	keys := []string{runKey, outKey, evKey}
	for _, ix := range r.runIndexes {
		keys = append(keys, r.IndexKey(bucket, ix))
	}
	withKey := "0"
	if key != "" && r.BucketForKey(key) == bucket {
		keys, withKey = append(keys, r.IdemKeyName(key)), "1"
	}
	at := ""
	if expect >= 0 {
		at = strconv.FormatInt(expect, 10)
	}
	res, err := deleteScript.Run(ctx, r.c, keys, runID, withKey, at).Result()
	if err != nil {
		return fmt.Errorf("store: delete run %s: %w", runID, err)
	}
	switch v := res.(type) {
	case int64:
		if v == 0 {
			return ErrNotFound
		}
		return nil
	case []any:
		if len(v) == 2 {
			if cur, err := parseVersion(v[1]); err == nil {
				return &ConflictError{Version: cur}
			}
		}
	}
	return fmt.Errorf("store: delete run %s: unexpected script reply %v", runID, res)
}

// Ping checks the connection.
func (r *Redis) Ping(ctx context.Context) error {
	return r.c.Ping(ctx).Err()
}

// Close closes the client.
func (r *Redis) Close() error { return r.c.Close() }

// CommitScriptHash is the SHA-1 the commit script is sent under (EVALSHA):
// fault tests use it to pick the commits out of a connection's commands.
func CommitScriptHash() string { return commitScript.Hash() }
