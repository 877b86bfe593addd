package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/pkg/client"
)

// engineApart is engine-svc and a Redis of its own, both held to the
// machine's last CPU, for the MCP door's ratio: deployed, the engine and
// its Redis run in pods of their own, so the door and the go-sdk no-op
// tool it is compared with should share their CPUs with nothing of the
// engine's. wrap runs a command on the other CPUs.
type engineApart struct {
	addr string   // engine-svc's gRPC address
	wrap []string // taskset prefix: the other CPUs
	stop func()
}

// startEngineApart builds engine-svc from root and starts it and a fresh
// redis-server on the last CPU (taskset). It needs two CPUs or more,
// taskset and redis-server; without them it says which is missing.
func startEngineApart(ctx context.Context, root, tmp string) (*engineApart, error) {
	cpus := runtime.NumCPU()
	if cpus < 2 {
		return nil, fmt.Errorf("the engine apart needs 2 CPUs or more; this process may use %d", cpus)
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return nil, fmt.Errorf("the engine apart needs taskset (util-linux): %w", err)
	}
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("the engine apart needs redis-server: %w", err)
	}
	last := strconv.Itoa(cpus - 1)
	others := "0"
	if cpus > 2 {
		others = "0-" + strconv.Itoa(cpus-2)
	}
	onLast := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(taskset, append([]string{"-c", last, name}, args...)...)
		// Killed with its children if this process dies first.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
	var started []*exec.Cmd
	stop := func() {
		for i := len(started) - 1; i >= 0; i-- {
			c := started[i]
			_ = c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}
	}
	fail := func(err error) (*engineApart, error) {
		stop()
		return nil, err
	}

	redisPort, err := freePort()
	if err != nil {
		return nil, err
	}
	redisLog, err := os.Create(filepath.Join(tmp, "redis-apart.log"))
	if err != nil {
		return nil, err
	}
	defer redisLog.Close()
	rs := onLast(redisServer, "--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp)
	rs.Stdout, rs.Stderr = redisLog, redisLog
	if err := rs.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	started = append(started, rs)
	redisURL := fmt.Sprintf("redis://127.0.0.1:%d/0", redisPort)
	if err := waitRedis(ctx, redisURL); err != nil {
		return fail(fmt.Errorf("redis-server on CPU %s (log %s): %w", last, redisLog.Name(), err))
	}

	bin := filepath.Join(tmp, "engine-svc")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/engine-svc")
	build.Dir = filepath.Join(root, "engine-svc")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fail(fmt.Errorf("go build engine-svc: %w", err))
	}
	enginePort, err := freePort()
	if err != nil {
		return fail(err)
	}
	engineLog, err := os.Create(filepath.Join(tmp, "engine-apart.log"))
	if err != nil {
		return fail(err)
	}
	defer engineLog.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", enginePort)
	es := onLast(bin, "--addr", addr, "--redis-url", redisURL, "--metrics-addr", "")
	es.Stdout, es.Stderr = engineLog, engineLog
	if err := es.Start(); err != nil {
		return fail(fmt.Errorf("start engine-svc: %w", err))
	}
	started = append(started, es)
	if err := waitEngine(ctx, addr); err != nil {
		return fail(fmt.Errorf("engine-svc on CPU %s (log %s): %w", last, engineLog.Name(), err))
	}
	return &engineApart{addr: addr, wrap: []string{taskset, "-c", others}, stop: stop}, nil
}

// freePort is a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitEngine waits up to thirty seconds for engine-svc at addr to take
// a connection (it listens once its store answers).
func waitEngine(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		conn, err := client.Dial(ctx, addr)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitRedis waits up to ten seconds for the Redis at url to answer PING.
func waitRedis(ctx context.Context, url string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rc := redis.NewClient(opts)
	defer rc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		err := rc.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
