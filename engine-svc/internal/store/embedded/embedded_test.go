package embedded_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
)

var ctx = context.Background()

func open(t *testing.T, dir string) (*embedded.Server, *redis.Client) {
	t.Helper()
	srv, err := embedded.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() {
		_ = c.Close()
		_ = srv.Close()
	})
	return srv, c
}

// seed writes one of everything the store uses, plus each raw key type.
func seed(t *testing.T, c *redis.Client) (runID string) {
	t.Helper()
	s := store.NewRedis(c, store.Options{Buckets: 8})
	key := "wf\x00persist"
	runID = s.NewRunID(key)
	if err := s.CommitRun(ctx, &store.Change{RunID: runID, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{"a":1}`),
		Outputs:  map[string][]byte{"fetch": []byte(`{"ok":true}`)},
		Evidence: [][]byte{[]byte(`e0`), {0xff, 0x00, 'b', 'i', 'n'}},
		Index:    []store.IndexOp{{Index: "index", Member: runID, Score: 1234}},
		IdemKey:  key, IdemTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutWorkflow(ctx, "deploy", []byte(`{"steps":[]}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.SAdd(ctx, "raw:set", "x", "y").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(ctx, "raw:zset", redis.Z{Score: 1.5, Member: "m"}).Err(); err != nil {
		t.Fatal(err)
	}
	return runID
}

// check asserts that seed's data is all there.
func check(t *testing.T, c *redis.Client, runID string) {
	t.Helper()
	s := store.NewRedis(c, store.Options{Buckets: 8})
	snap, err := s.LoadRun(ctx, runID)
	if err != nil {
		t.Fatalf("load after reopen: %v", err)
	}
	if snap.Version != 0 || string(snap.Doc) != `{"a":1}` || string(snap.Outputs["fetch"]) != `{"ok":true}` || snap.EvidenceLen != 2 {
		t.Fatalf("restored run = %+v", snap)
	}
	ev, err := s.Evidence(ctx, runID, 1, 1)
	if err != nil || len(ev) != 1 || !bytes.Equal(ev[0], []byte{0xff, 0x00, 'b', 'i', 'n'}) {
		t.Fatalf("binary evidence = %q, %v", ev, err)
	}
	if got, _ := s.LookupKey(ctx, "wf\x00persist"); got != runID {
		t.Fatalf("idempotency key = %q, want %s", got, runID)
	}
	if ttl, _ := c.PTTL(ctx, s.IdemKeyName("wf\x00persist")).Result(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("idempotency key ttl = %v, want (0, 1h]", ttl)
	}
	if page, err := s.ListRuns(ctx, store.ListFilter{}); err != nil || len(page.RunIDs) != 1 || page.RunIDs[0] != runID {
		t.Fatalf("list = %+v, %v", page, err)
	}
	if wf, err := s.GetWorkflow(ctx, "deploy"); err != nil || wf.Version != 1 {
		t.Fatalf("workflow = %+v, %v", wf, err)
	}
	if m, _ := c.SMembers(ctx, "raw:set").Result(); len(m) != 2 {
		t.Fatalf("set = %v", m)
	}
	if sc, _ := c.ZScore(ctx, "raw:zset", "m").Result(); sc != 1.5 {
		t.Fatalf("zset score = %v", sc)
	}
}

func TestReopenRestoresEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, c := open(t, dir)
	runID := seed(t, c)
	_ = c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	_, c2 := open(t, dir)
	check(t, c2, runID)
}

// The base alone holds everything up to its cut (later writes are in the
// journal, which this copy leaves behind).
func TestCrashKeepsTheLastSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, c := open(t, dir)
	runID := seed(t, c)
	if err := srv.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// The process "dies" now: copy the file as it is on disk.
	data, err := os.ReadFile(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "after-snapshot", "lost", 0).Err(); err != nil {
		t.Fatal(err)
	}
	crashed := t.TempDir()
	if err := os.WriteFile(filepath.Join(crashed, embedded.SnapshotFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, c2 := open(t, crashed)
	check(t, c2, runID)
	if n, _ := c2.Exists(ctx, "after-snapshot").Result(); n != 0 {
		t.Fatal("a write after the snapshot survived the crash copy")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestSnapshotOnlyWhenSomethingWasWritten(t *testing.T) {
	t.Parallel()
	srv, c := open(t, t.TempDir())
	exists := func() bool { _, err := os.Stat(srv.Path()); return err == nil }
	steps := []struct {
		name  string
		do    func() error
		wrote bool
	}{
		{"nothing yet", func() error { return nil }, false},
		{"a read", func() error { return c.Get(ctx, "nope").Err() }, false},
		{"a read-only script", func() error { return c.EvalRO(ctx, `return redis.call('GET', 'x')`, nil).Err() }, false},
		{"a write", func() error { return c.Set(ctx, "k", "v", 0).Err() }, true},
		{"a script write", func() error { return c.Eval(ctx, `return redis.call('SET', 'x', '1')`, nil).Err() }, true},
		{"a MULTI write", func() error {
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error { p.Set(ctx, "m", "1", 0); return nil })
			return err
		}, true},
	}
	for _, st := range steps {
		_ = os.Remove(srv.Path())
		if err := st.do(); err != nil && err != redis.Nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if err := srv.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		if exists() != st.wrote {
			t.Fatalf("after %s: snapshot written = %v, want %v", st.name, exists(), st.wrote)
		}
	}
}

func TestCorruptSnapshotIsAClearError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content string
	}{
		{"not json", "\x00\x01garbage"},
		{"truncated", `{"format":"realm-embedded-store","version":1,"keys":[{"key":"a","ty`},
		{"wrong format", `{"format":"something-else","version":1,"keys":[]}`},
		{"future version", `{"format":"realm-embedded-store","version":99,"keys":[]}`},
		{"unknown type", `{"format":"realm-embedded-store","version":1,"keys":[{"key":"a","type":"stream"}]}`},
		{"string without value", `{"format":"realm-embedded-store","version":1,"keys":[{"key":"a","type":"string"}]}`},
		{"bad score", `{"format":"realm-embedded-store","version":1,"keys":[{"key":"a","type":"zset","zset":[{"member":"m","score":"high"}]}]}`},
		{"bad base64", `{"format":"realm-embedded-store","version":1,"keys":[{"key":{"b64":"!!"},"type":"string","string":"v"}]}`},
		{"trailing data", `{"format":"realm-embedded-store","version":1,"keys":[]} {}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, embedded.SnapshotFile)
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			srv, err := embedded.Open(ctx, dir, nil)
			if err == nil {
				_ = srv.Close()
				t.Fatal("corrupt snapshot accepted")
			}
			if !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not say the snapshot at %s is corrupt", err, path)
			}
			// The directory is not left locked by the failed open.
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			srv, err = embedded.Open(ctx, dir, nil)
			if err != nil {
				t.Fatalf("reopen after removing the corrupt file: %v", err)
			}
			_ = srv.Close()
		})
	}
}

func TestExpiredKeysAreDroppedOnRestore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	past := time.Now().Add(-time.Minute).UnixMilli()
	future := time.Now().Add(time.Hour).UnixMilli()
	content := `{"format":"realm-embedded-store","version":1,"keys":[` +
		`{"key":"gone","type":"string","string":"v","expire_at_ms":` + itoa(past) + `},` +
		`{"key":"kept","type":"string","string":"v","expire_at_ms":` + itoa(future) + `},` +
		`{"key":{"b64":"/w=="},"type":"list","list":["a",{"b64":"AP8="}]}]}`
	if err := os.WriteFile(filepath.Join(dir, embedded.SnapshotFile), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, c := open(t, dir)
	if n, _ := c.Exists(ctx, "gone").Result(); n != 0 {
		t.Fatal("a key that expired while the store was down came back")
	}
	if ttl, _ := c.PTTL(ctx, "kept").Result(); ttl <= 50*time.Minute || ttl > time.Hour {
		t.Fatalf("kept ttl = %v, want about 1h", ttl)
	}
	if l, _ := c.LRange(ctx, "\xff", 0, -1).Result(); len(l) != 2 || l[1] != "\x00\xff" {
		t.Fatalf("binary list = %q", l)
	}
}

func TestSecondOpenOfADirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open(t, dir)
	if srv, err := embedded.Open(ctx, dir, nil); err == nil {
		_ = srv.Close()
		t.Fatal("two servers opened one data directory")
	}
}

// The store's scripts depend on these; miniredis must keep supporting them.
func TestSupportsTheCommandsTheStoreUses(t *testing.T) {
	t.Parallel()
	_, c := open(t, t.TempDir())
	sha, err := c.ScriptLoad(ctx, `redis.call('HSET', KEYS[1], 'a', '1', 'b', '2'); return redis.call('HLEN', KEYS[1])`).Result()
	if err != nil {
		t.Fatalf("SCRIPT LOAD: %v", err)
	}
	if n, err := c.EvalSha(ctx, sha, []string{"h"}).Int(); err != nil || n != 2 {
		t.Fatalf("EVALSHA with multi-field HSET = %d, %v", n, err)
	}
	if err := c.Set(ctx, "px", "v", 1500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := c.PTTL(ctx, "px").Result(); ttl <= 0 || ttl > 1500*time.Millisecond {
		t.Fatalf("SET PX ttl = %v", ttl)
	}
	if n, err := c.RPush(ctx, "l", "a", "b", "c").Result(); err != nil || n != 3 {
		t.Fatalf("RPUSH = %d, %v", n, err)
	}
	if n, err := c.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}).Result(); err != nil || n != 2 {
		t.Fatalf("ZADD = %d, %v", n, err)
	}
}

func TestCloseTwiceIsSafe(t *testing.T) {
	t.Parallel()
	srv, err := embedded.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}

// setOnceWritesResume sets key to v, trying every 100 ms for up to 10 s
// while the store refuses writes (after what names the fault).
func setOnceWritesResume(t *testing.T, c *redis.Client, key, v, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Set(ctx, key, v, 0).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes did not resume after %s: %v", after, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TTLs run out with the wall clock: a key is gone soon after its TTL, its
// TTL shrinks meanwhile, a key set again before it ran out keeps its new
// TTL, and the expiry is journaled, so a restart does not bring it back.
func TestKeysExpireWithTheirTTL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := embedded.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	// The TTL leaves a wide margin: on a loaded machine the renewals below
	// must still come before it runs out.
	const ttl = 2 * time.Second
	for _, k := range []string{"short", "renewed", "persisted"} {
		if err := c.Set(ctx, k, "v", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, "long", "v", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := c.Set(ctx, "renewed", "v2", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Persist(ctx, "persisted").Err(); err != nil {
		t.Fatal(err)
	}
	if left, _ := c.PTTL(ctx, "short").Result(); left <= 0 || left >= ttl {
		t.Fatalf("ttl after 200ms = %v, want it to have shrunk below %v", left, ttl)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Exists(ctx, "short").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a key with a 2s TTL still exists after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	for _, k := range []string{"renewed", "persisted", "long"} {
		if n, _ := c.Exists(ctx, k).Result(); n != 1 {
			t.Errorf("%s is gone; only the expired key should be", k)
		}
	}
	_ = c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened at once: the expiry was journaled (the key's TTL alone would
	// restart from the replay of its SET).
	_, c = open(t, dir)
	if n, _ := c.Exists(ctx, "short").Result(); n != 0 {
		t.Fatal("the expired key came back after a restart")
	}
	if v, _ := c.Get(ctx, "renewed").Result(); v != "v2" {
		t.Fatalf("renewed = %q after a restart, want v2", v)
	}
}
