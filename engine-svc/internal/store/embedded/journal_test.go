package embedded_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
)

// lastJournal is the newest journal file in dir.
func lastJournal(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "store.journal.*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no journal in %s (%v)", dir, err)
	}
	sort.Strings(files)
	return files[len(files)-1]
}

// writeAndClose writes k1..k3 (one journal record each) and closes.
func writeAndClose(t *testing.T, dir string) {
	t.Helper()
	srv, c := open(t, dir)
	for i := 1; i <= 3; i++ {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
}

// A crash mid-append leaves part of the last record: it was never
// acknowledged, so it is dropped, the rest loads, and the log says so.
func TestTornLastRecordIsDroppedAndLogged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		damage func(path string) error
		want   []string // keys present after reopen
	}{
		{"last record cut short", func(path string) error {
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, fi.Size()-3)
		}, []string{"k1", "k2"}},
		{"half a header appended", func(path string) error { return appendBytes(path, []byte{9, 0, 0}) }, []string{"k1", "k2", "k3"}},
		{"header of a record that never arrived", func(path string) error {
			return appendBytes(path, []byte{100, 0, 0, 0, 1, 2, 3, 4, 'x'})
		}, []string{"k1", "k2", "k3"}},
		{"zero-filled tail", func(path string) error { return appendBytes(path, make([]byte, 64)) }, []string{"k1", "k2", "k3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeAndClose(t, dir)
			if err := tc.damage(lastJournal(t, dir)); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			var mu sync.Mutex
			srv, err := embedded.Open(ctx, dir, slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)))
			if err != nil {
				t.Fatalf("open after a torn append: %v", err)
			}
			c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			t.Cleanup(func() { _ = c.Close(); _ = srv.Close() })
			got, err := c.Keys(ctx, "k*").Result()
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("keys = %v, want %v", got, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(logs.String(), "torn last journal record") {
				t.Fatalf("the dropped record is not in the log:\n%s", logs.String())
			}
		})
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func appendBytes(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Damage before the last record is not a crash mid-append: Open refuses,
// naming the file and the offset, instead of loading part of the data.
func TestCorruptJournalStopsOpen(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		offset int64 // byte flipped
		want   string
	}{
		{"payload of the first record", 10, "at offset 0 (checksum mismatch)"},
		{"checksum of the first record", 5, "at offset 0 (checksum mismatch)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeAndClose(t, dir)
			path := lastJournal(t, dir)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[tc.offset] ^= 0xff
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = embedded.Open(ctx, dir, nil)
			if err == nil {
				t.Fatal("a corrupt journal opened")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want the file %s and %q", err, path, tc.want)
			}
		})
	}
}

// Scripts (EVAL, EVALSHA, the writes inside them) and MULTI/EXEC replay
// from the journal alone.
func TestJournalReplaysScriptsAndTransactions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, c := open(t, dir)
	if err := c.Eval(ctx, `redis.call('SET', 'e', ARGV[1]); return 1`, nil, "eval").Err(); err != nil {
		t.Fatal(err)
	}
	sha, err := c.ScriptLoad(ctx, `redis.call('HSET', KEYS[1], 'f', ARGV[1]); return 1`).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EvalSha(ctx, sha, []string{"h"}, "evalsha").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tx1", "a", 0)
		p.RPush(ctx, "tx2", "b", "c")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Watch(ctx, func(*redis.Tx) error { return nil }, "x"); err == nil {
		t.Fatal("WATCH was accepted; the journal cannot replay its outcome")
	}
	_ = c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// Close writes no base: these writes come back from the journal only.
	_, c2 := open(t, dir)
	if v, _ := c2.Get(ctx, "e").Result(); v != "eval" {
		t.Fatalf("EVAL write = %q", v)
	}
	if v, _ := c2.HGet(ctx, "h", "f").Result(); v != "evalsha" {
		t.Fatalf("EVALSHA write = %q", v)
	}
	if v, _ := c2.Get(ctx, "tx1").Result(); v != "a" {
		t.Fatalf("MULTI write = %q", v)
	}
	if v, _ := c2.LRange(ctx, "tx2", 0, -1).Result(); strings.Join(v, ",") != "b,c" {
		t.Fatalf("MULTI list = %v", v)
	}
}

// helperEnv makes the test binary a store process for the kill -9 test.
const helperEnv = "REALM_EMBEDDED_KILL_HELPER_DIR"

// TestKillHelper is not a test: run with helperEnv set, it opens the store
// in that directory, prints its address and waits to be killed.
func TestKillHelper(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestKill9KeepsEveryAcknowledgedRun")
	}
	srv, err := embedded.Open(ctx, dir, nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("ADDR", srv.Addr())
	select {}
}

// The measurement: runs committed by concurrent writers, SIGKILL
// while they write, restart: every acknowledged run is there, and every
// unacknowledged one is there whole or not at all.
func TestKill9KeepsEveryAcknowledgedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	t.Parallel()
	dir := t.TempDir()
	for round := range 2 { // the second round replays on top of a base
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "ADDR ") {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("helper said %q (%v)", line, err)
		}
		addr := strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))

		// Round 0: a client each, one commit per round trip. Round 1: one
		// client whose concurrent commits share pipelines, as engine-svc's.
		const writers = 8
		var mu sync.Mutex
		acked := map[string]string{}
		tried := map[string]string{}
		var wg sync.WaitGroup
		shared := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		piped := store.NewRedis(shared, store.Options{Buckets: 8, PipelineCommits: true})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := piped
				if round == 0 {
					c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
					defer func() { _ = c.Close() }()
					s = store.NewRedis(c, store.Options{Buckets: 8})
				}
				for i := 0; ; i++ {
					id := s.NewRunID(fmt.Sprintf("r%d-w%d-%d", round, w, i))
					doc := fmt.Sprintf(`{"round":%d,"writer":%d,"n":%d}`, round, w, i)
					mu.Lock()
					tried[id] = doc
					mu.Unlock()
					if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(doc),
						Outputs: map[string][]byte{"s": []byte(doc)}, Evidence: [][]byte{[]byte(doc)}}); err != nil {
						return // the process is gone
					}
					mu.Lock()
					acked[id] = doc
					mu.Unlock()
				}
			}()
		}
		time.Sleep(700 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		wg.Wait()
		_ = cmd.Wait()
		_ = shared.Close()

		srv, err := embedded.Open(ctx, dir, nil)
		if err != nil {
			t.Fatalf("restart after kill -9: %v", err)
		}
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		s := store.NewRedis(c, store.Options{Buckets: 8})
		if len(acked) < 20 {
			t.Errorf("round %d: only %d runs acknowledged before the kill; the test proves little", round, len(acked))
		}
		lost, partial, extra := 0, 0, 0
		for id, doc := range tried {
			snap, err := s.LoadRun(ctx, id)
			_, wasAcked := acked[id]
			switch {
			case errors.Is(err, store.ErrNotFound):
				if wasAcked {
					lost++
				}
			case err != nil:
				t.Fatalf("load %s: %v", id, err)
			default:
				if string(snap.Doc) != doc || string(snap.Outputs["s"]) != doc || snap.EvidenceLen != 1 {
					partial++
				} else if !wasAcked {
					extra++
				}
			}
		}
		t.Logf("round %d: %d acknowledged, %d tried; %d unacknowledged present whole", round, len(acked), len(tried), extra)
		if lost > 0 || partial > 0 {
			t.Errorf("round %d: %d acknowledged runs lost, %d runs partial", round, lost, partial)
		}
		_ = c.Close()
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// copyDir copies the store's files as they are on disk now (a crash copy:
// everything acknowledged has been fsynced).
func copyDir(t testing.TB, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "store.lock" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// Writes on both sides of a compaction survive a crash, whether the crash
// comes before the new base is written (old base + both journals) or after
// (new base + the new journal).
func TestCompactionKeepsWritesOnBothSidesOfTheCut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, c := open(t, dir)
	if err := c.Set(ctx, "before-cut", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	beforeBase := copyDir(t, dir) // the crash before the rotation/base
	if err := srv.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "after-cut", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	after := copyDir(t, dir)
	// A crash after the rotation but before the new base landed: the old
	// base with both journals.
	mid := copyDir(t, dir)
	old, err := os.ReadFile(filepath.Join(beforeBase, embedded.SnapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mid, embedded.SnapshotFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, j := range mustGlob(t, filepath.Join(beforeBase, "store.journal.*")) {
		data, err := os.ReadFile(j)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mid, filepath.Base(j)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, d := range map[string]string{"after the new base": after, "before the new base": mid} {
		_, c2 := open(t, d)
		for k, want := range map[string]string{"before-cut": "1", "after-cut": "2"} {
			if v, err := c2.Get(ctx, k).Result(); err != nil || v != want {
				t.Fatalf("crash %s: %s = %q, %v", name, k, v, err)
			}
		}
	}
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("glob %s: %v %v", pattern, m, err)
	}
	return m
}
