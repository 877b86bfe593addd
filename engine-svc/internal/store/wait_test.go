package store_test

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/storetest"
)

// The test servers have no replicas: WAIT 1 confirms none, so the commit,
// written on the master, is reported failed, and a conflict stays one.
func TestWaitReplicasReportsAnUnconfirmedCommit(t *testing.T) {
	t.Parallel()
	for _, b := range []backend{{"RealRedis", realRedis}, {"Cluster", clusterRedis}} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s, _ := b.open(t, storetest.UniquePrefix(t), store.Options{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
			id := s.NewRunID("")
			err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)})
			if err == nil || !strings.Contains(err.Error(), "only 0 of the 1 replicas") {
				t.Fatalf("commit err = %v, want one saying only 0 of the 1 replicas acknowledged", err)
			}
			snap, err := s.LoadRun(ctx, id)
			if err != nil || snap.Version != 0 {
				t.Fatalf("the master must hold the write: %+v, %v", snap, err)
			}
			err = s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: -1, NewVersion: 0, Doc: []byte(`{}`)})
			if !store.IsConflict(err) {
				t.Fatalf("second create: err = %v, want a conflict", err)
			}
		})
	}
}

// A master with one replica of its own confirms the commit.
func TestWaitReplicasAcknowledgedByAReplica(t *testing.T) {
	t.Parallel()
	master := startRedis(t)
	replica := startRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(master))
	rc := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", replica)})
	defer rc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, _ := rc.Info(ctx, "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not link up:\n%s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", master)})
	s := store.NewRedis(c, store.Options{WaitReplicas: 1, WaitTimeout: 5 * time.Second})
	defer s.Close()
	id := s.NewRunID("")
	for v := int64(0); v < 3; v++ {
		if err := s.CommitRun(ctx, &store.Change{RunID: id, ExpectVersion: v - 1, NewVersion: v, Doc: []byte(`{}`)}); err != nil {
			t.Fatalf("commit v%d: %v", v, err)
		}
	}
	if got, err := rc.Exists(ctx, s.RunKey(id)).Result(); err != nil || got != 1 {
		t.Fatalf("replica lacks the run: %d, %v", got, err)
	}
}

// startRedis runs a throwaway redis-server on a free port, stopped when the
// test ends.
func startRedis(t *testing.T, args ...string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server (part of the redis-server package, as make test needs): %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	for i := 0; c.Ping(ctx).Err() != nil; i++ {
		if i > 100 {
			t.Fatalf("redis-server on %d did not answer", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return port
}
