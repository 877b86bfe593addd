package replicas

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/runner"
)

// repoRoot is the repository's root, two folders up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goTool is the go command running this test: go test puts its GOROOT/bin
// first on the test's PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// binaries are the programs the test runs, built once into a temp folder.
type binaries struct{ engine, mcp, realm, agent string }

// buildBinaries builds engine-svc, mcp-svc, agent-svc and realm from this tree (the
// workspace of go.work) into a temp folder.
func buildBinaries(t *testing.T) binaries {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(goTool(), "build", "-o", dir+string(os.PathSeparator),
		"./engine-svc/cmd/engine-svc", "./mcp-svc/cmd/mcp-svc", "./agent-svc/cmd/agent-svc", "./cli/cmd/realm")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return binaries{engine: filepath.Join(dir, "engine-svc"), mcp: filepath.Join(dir, "mcp-svc"), realm: filepath.Join(dir, "realm"),
		agent: filepath.Join(dir, "agent-svc")}
}

// redisURL is $REDIS_URL, else the Redis make test starts.
func redisURL() string {
	if u := strings.TrimSpace(os.Getenv("REDIS_URL")); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379"
}

// isolatedPrefix checks that the real Redis answers and returns a key
// prefix of this test's own; its keys are deleted when the test ends.
func isolatedPrefix(t *testing.T, url string) string {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("REDIS_URL %q: %v", url, err)
	}
	rc := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rc.Ping(ctx).Err(); err != nil {
		rc.Close()
		t.Fatalf("real Redis unreachable at %s (%v): start redis-server or set REDIS_URL (make test starts one)", url, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "realm-replicas-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		defer rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := rc.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := rc.Del(ctx, keys[:n]...).Err(); err != nil {
				t.Logf("cleanup of %s: %v", prefix, err)
				return
			}
			keys = keys[n:]
		}
	})
	return prefix
}

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// proc is a started program; its output is kept for the failure report.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs bin with args; it is killed when the test ends, and its
// output is logged if the test failed.
func start(t *testing.T, name, bin string, args ...string) (*proc, error) {
	return startEnv(t, name, bin, os.Environ(), args...)
}

// startEnv is start with the environment env.
func startEnv(t *testing.T, name, bin string, env []string, args ...string) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = env
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, tail(p.out.String(), 4000))
		}
	})
	return p, nil
}

// kill ends the process with SIGKILL (no graceful stop: in-flight calls
// and claims are left as they are) and waits for it to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// startEngine starts engine-svc on addr over the real Redis under prefix,
// with claims that go stale after window, and waits until it answers. It
// is safe to call from any goroutine.
func startEngine(bins binaries, name, addr, url, prefix string, window time.Duration, t *testing.T) (*proc, error) {
	p, err := start(t, name, bins.engine, "--addr", addr, "--redis-url", url, "--redis-prefix", prefix,
		"--claim-window", window.String(), "--shutdown-grace", "1s")
	if err != nil {
		return nil, err
	}
	return p, awaitEngine(p, name, addr)
}

// awaitEngine waits until the started engine-svc p answers on addr.
func awaitEngine(p *proc, name, addr string) error {
	err := poll(name+" to answer on "+addr, 15*time.Second, func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %s", name, p.out.String())
	default:
	}
	return err
}

// startMCP starts mcp-svc in dev mode in front of engines (a
// comma-separated list) and returns its /mcp URL.
func startMCP(t *testing.T, bins binaries, engines string) string {
	t.Helper()
	addr := freeAddr(t)
	p, err := start(t, "mcp-svc", bins.mcp, "--addr", addr, "--engine-addr", engines, "--dev")
	if err != nil {
		t.Fatal(err)
	}
	if err := answersHealth(p, addr); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + "/mcp"
}

// answersHealth waits until the HTTP service p answers GET /healthz on
// addr with 200.
func answersHealth(p *proc, addr string) error {
	err := poll(p.name+" to answer on "+addr, 15*time.Second, func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %s", p.name, p.out.String())
	default:
	}
	return err
}

// poll calls ok until it holds, or fails after limit.
// serveHandler serves one handler from a runner (pkg/runner) registered
// with the engine at engineAddr, and waits until the registry (read through
// conn) lists it. The returned func stops the runner and waits for it.
func serveHandler(t *testing.T, ctx context.Context, conn *grpc.ClientConn, engineAddr, name string, reg runner.Registration) (stop func()) {
	t.Helper()
	runnerCtx, stopRunner := context.WithCancel(context.Background())
	runnerDone := make(chan error, 1)
	go func() {
		runnerDone <- runner.Serve(runnerCtx, runner.Options{Name: name, EngineAddr: engineAddr, Lease: 10 * time.Second,
			ShutdownTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)}, reg)
	}()
	stop = func() { stopRunner(); <-runnerDone }
	regs := realmv1.NewRegistryServiceClient(conn)
	if err := poll("the runner to register", 10*time.Second, func() bool {
		caps, err := regs.ListCapabilities(ctx, &realmv1.ListCapabilitiesRequest{})
		return err == nil && len(caps.GetRunners()) > 0
	}); err != nil {
		stop()
		t.Fatal(err)
	}
	return stop
}

func poll(what string, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up waiting for %s after %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// realm runs the realm command against engines and returns its stdout; a
// non-zero exit fails the test.
func realm(t *testing.T, bins binaries, engines string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bins.realm, append([]string{"--addr", engines}, args...)...)
	cmd.Env = append(os.Environ(), "REALM_OPERATOR=replicas-test")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("realm %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
