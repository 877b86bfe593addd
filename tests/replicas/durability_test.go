package replicas

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// noRedisEnv is this process's environment without REDIS_*, so only the
// flags name the Redis.
func noRedisEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_") {
			env = append(env, kv)
		}
	}
	return env
}

// engine-svc refuses a Redis that may evict run keys, with the fix.
func TestEngineBinaryRefusesAnEvictingRedis(t *testing.T) {
	t.Parallel()
	bins := buildBinaries(t)
	port := startRedisServer(t, "--maxmemory-policy", "allkeys-lru")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.engine, "--addr", freeAddr(t), "--redis-url", fmt.Sprintf("redis://127.0.0.1:%d", port))
	cmd.Env = noRedisEnv()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "maxmemory-policy must be noeviction, but it has allkeys-lru") ||
		!strings.Contains(string(out), "CONFIG SET maxmemory-policy noeviction") {
		t.Fatalf("engine-svc on an evicting Redis: %v\n%s", err, out)
	}
}

// With --redis-wait-replicas 1 on the Cluster, whose masters have no
// replicas, a commit is reported failed with ENGINE_STORE_FAILED saying how
// many replicas confirmed it.
func TestEngineBinaryReportsUnconfirmedCommits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addrs := clusterAddrs()
	prefix := clusterPrefix(t, addrs)
	bins := buildBinaries(t)
	_, addr := startEngineOn(t, bins, "engine-svc (wait replicas)", "--redis-cluster-addrs", addrs,
		"--redis-prefix", prefix, "--redis-wait-replicas", "1")
	eng, conn, err := client.DialEngine(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg, err := eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(clusterWorkflowYAML), Path: "cluster_shipping.yaml"}})
	if err != nil || !reg.GetRegistered() {
		t.Fatalf("register: %v %s", err, reg.GetReport().GetText())
	}
	_, err = eng.StartRun(ctx, &realmv1.StartRunRequest{WorkflowId: "cluster_shipping"})
	e, ok := errcode.FromStatus(err)
	if !ok || e.Code != errcode.EngineStoreFailed || !strings.Contains(e.Message, "only 0 of the 1 replicas") {
		t.Fatalf("start_run with no replica to confirm it: %v", err)
	}
}

// startEngineOn starts engine-svc on a free address with the Redis args
// give (and none from the environment), waits until it answers, and
// returns it with its address.
func startEngineOn(t *testing.T, bins binaries, name string, args ...string) (*proc, string) {
	t.Helper()
	addr := freeAddr(t)
	p, err := startEnv(t, name, bins.engine, noRedisEnv(), append([]string{"--addr", addr, "--shutdown-grace", "1s"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := awaitEngine(p, name, addr); err != nil {
		t.Fatal(err)
	}
	return p, addr
}

// startRedisServer runs a throwaway redis-server with args (a config file
// first, if any) on a free port until the test ends.
func startRedisServer(t *testing.T, args ...string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	// A config file, if any, must come first.
	args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--dir", t.TempDir())
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server (make test installs it): %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	if err := poll("redis-server to answer", 5*time.Second, func() bool { return c.Ping(context.Background()).Err() == nil }); err != nil {
		t.Fatal(err)
	}
	return port
}
