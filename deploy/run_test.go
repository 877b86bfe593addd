package deploy

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunStopsEveryServiceOnSignal starts the laptop stack (`make run`,
// then scripts/run.sh on the binaries it built) on free ports, so a
// developer's own stack is left alone, signals it, and checks that no
// process it started is left and that every port it listened on is free.
// The cases run one after another: each stack is eight processes.
func TestMakeRunStopsEveryServiceOnSignal(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make not found: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name    string
		make    bool // start `make run` (it builds bin/) rather than scripts/run.sh
		notify  bool // with REALM_NOTIFY_MANIFEST: notify-svc is a ninth process
		signals []syscall.Signal
	}{
		// The case: make forwards SIGTERM to run.sh.
		{name: "make run SIGTERM", make: true, signals: []syscall.Signal{syscall.SIGTERM}},
		{name: "run.sh SIGINT", signals: []syscall.Signal{syscall.SIGINT}},
		{name: "run.sh SIGHUP", signals: []syscall.Signal{syscall.SIGHUP}},
		// A repeated signal must not cut the stop short.
		{name: "run.sh SIGTERM twice", signals: []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}},
		{name: "run.sh with notify-svc SIGTERM", notify: true, signals: []syscall.Signal{syscall.SIGTERM}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runStackAndSignal(ctx, t, tc.make, tc.notify, tc.signals)
		})
	}
}

func runStackAndSignal(ctx context.Context, t *testing.T, viaMake, notify bool, signals []syscall.Signal) {
	t.Helper()
	ports := freePorts(t, 10)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	engineAddr := addr(0)
	dataDir := filepath.Join(t.TempDir(), "data")
	env := append(os.Environ(),
		"REALM_DATA_DIR="+dataDir,
		"REALM_ENGINE_ADDR="+engineAddr,
		"REALM_AGENT_ADDR="+addr(1),
		"REALM_MCP_ADDR="+addr(2),
		"REALM_LISTEN_ADDR="+addr(3),
		"REALM_ENGINE_METRICS_ADDR="+addr(4),
		"REALM_AGENT_METRICS_ADDR="+addr(5),
		"REALM_EXAMPLE_RUNNER_METRICS_ADDR="+addr(6),
		"REALM_ADAPTER_RUNNER_METRICS_ADDR="+addr(7),
		"REALM_MCP_METRICS_ADDR="+addr(8),
		"REALM_CONSOLE_ADDR="+addr(9),
		"REDIS_URL=",
	)
	services := 8
	if notify {
		// An incoming webhook nobody answers: no gate opens in this test.
		manifest := filepath.Join(t.TempDir(), "realm.yaml")
		if err := os.WriteFile(manifest, []byte("version: 1\nnotifiers:\n  slack_gate:\n    type: slack\n    config: {webhook_url: 'http://127.0.0.1:9/hook'}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "REALM_NOTIFY_MANIFEST="+manifest)
		services = 9
	}
	var cmd *exec.Cmd
	if viaMake {
		cmd = exec.CommandContext(ctx, "make", "--no-print-directory", "run")
	} else {
		cmd = exec.CommandContext(ctx, "scripts/run.sh")
		env = append(env, "REALM_RUN_SKIP_BUILD=1")
	}
	cmd.Dir = repoRoot
	cmd.Env = env
	// A session of its own, as a terminal's job would be; the signals below
	// go to the process alone, not to a group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The services inherit the output pipe: do not wait on them to close
	// it once the script has exited (a service left behind is the failure
	// checked for below).
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Whatever happens, leave no process of this stack behind (each one's
	// arguments name this test's engine port).
	t.Cleanup(func() {
		for _, pid := range processesNaming(engineAddr) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	deadline := time.Now().Add(4 * time.Minute)
	for !strings.Contains(out.String(), "Realm is running") {
		select {
		case err := <-exited:
			t.Fatalf("stack exited before it was up (%v):\n%s", err, out.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack not up within 4m:\n%s", out.String())
		}
	}
	if n := len(processesNaming(engineAddr)); n < services {
		t.Fatalf("%d processes name %s, want the %d services:\n%s", n, engineAddr, services, out.String())
	}
	if notify && !strings.Contains(out.String(), "notify-svc: posts every gate to Slack") {
		t.Errorf("run.sh did not say notify-svc started:\n%s", out.String())
	}
	checkStackServesTLS(t, engineAddr, dataDir)
	for _, sig := range signals {
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("stack still running 90s after %v:\n%s", signals, out.String())
	}
	// run.sh waits for its children, so by now they are gone.
	if left := processesNaming(engineAddr); len(left) > 0 {
		t.Errorf("processes left after %v: %v\n%s", signals, left, out.String())
	}
	for i, p := range ports {
		l, err := net.Listen("tcp", addr(i))
		if err != nil {
			t.Errorf("port %d still held after %v: %v", p, signals, err)
			continue
		}
		_ = l.Close()
	}
}

// checkStackServesTLS: the stack `make run` starts speaks mutual TLS,
// with the development certificates it made in the data folder (the
// CLI's registrations above went through them).
func checkStackServesTLS(t *testing.T, engineAddr, dataDir string) {
	t.Helper()
	for _, f := range []string{"ca.crt", "engine-svc.crt", "operator.crt", "operator.key", "example-runner.crt"} {
		if _, err := os.Stat(filepath.Join(dataDir, "tls", f)); err != nil {
			t.Errorf("make run made no %s: %v", f, err)
		}
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", engineAddr,
		&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // only who answers is read
	if err != nil {
		t.Fatalf("engine-svc of make run does not speak TLS: %v", err)
	}
	defer conn.Close()
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "engine-svc" {
		t.Errorf("engine-svc presents the certificate of %q", cn)
	}
}

// freePorts returns n loopback ports nothing listens on (held together while
// chosen, so they differ).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	// The ports come from below the kernel's ephemeral range: the stack's
	// runners listen on port 0, and a port picked with ":0" here and closed
	// again could be handed to one of them before the service it was meant
	// for binds it (CI saw agent-svc refused its port that way).
	lo, hi := 20000, ephemeralLow()
	var ports []int
	for p, tries := lo+int(time.Now().UnixNano()%1000)*7, 0; len(ports) < n; p, tries = p+1, tries+1 {
		if tries > hi-lo {
			t.Fatalf("found %d free ports between %d and %d, want %d", len(ports), lo, hi, n)
		}
		if p >= hi {
			p = lo
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports = append(ports, p)
	}
	return ports
}

// ephemeralLow is the first port the kernel hands out for port 0.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 21000 {
				return v
			}
		}
	}
	return 32768
}

// processesNaming lists the pids whose command line contains s.
func processesNaming(s string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// syncBuffer is a bytes.Buffer safe for the command's writers and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
