package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// testBinary is a package's compiled test binary.
type testBinary struct {
	module string // where go test -c runs
	pkg    string // the package, relative to module
	pkgDir string // where the binary runs, as go test would run it
	path   string
}

// engineBinary is engine-svc's server package, whose test binary holds
// the transition and store-size benchmarks.
func engineBinary(root string) *testBinary {
	return &testBinary{pkgDir: filepath.Join(root, "engine-svc", "internal", "server"), module: filepath.Join(root, "engine-svc"), pkg: "./internal/server"}
}

func (b *testBinary) build(ctx context.Context, path string) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", path, b.pkg)
	cmd.Dir = b.module
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test -c %s: %w", b.pkg, err)
	}
	b.path = path
	return nil
}

// job is one run of a test binary's benchmarks.
type job struct {
	label string
	bin   *testBinary
	bench string   // -test.bench pattern
	n     int      // -test.benchtime, iterations
	count int      // -test.count (0: 1)
	env   []string // added to the environment
	wrap  []string // a command the binary runs under (taskset -c 0)
}

// run runs the job, copies its output to raw, adds its results and prints
// each result as it comes, with any failure lines.
func (j job) run(ctx context.Context, raw io.Writer, into Results) error {
	args := []string{"-test.run", "^$", "-test.bench", j.bench, "-test.benchtime", fmt.Sprintf("%dx", j.n),
		"-test.benchmem", "-test.count", fmt.Sprint(max(j.count, 1)), "-test.timeout", "0"}
	argv := append(append(slices.Clone(j.wrap), j.bin.path), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = j.bin.pkgDir
	cmd.Env = append(os.Environ(), j.env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	fmt.Fprintf(raw, "# %s\n# %s\n", j.label, strings.Join(append(append(slices.Clone(j.wrap), filepath.Base(j.bin.path)), args...), " "))
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	found := 0
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(raw, line)
		if name, s, ok := ParseLine(line); ok {
			into.Add(name, s)
			found++
			fmt.Printf("    %s: %s\n", name, summary(s))
		} else if strings.Contains(line, "FAIL") || strings.Contains(line, "_test.go:") || strings.HasPrefix(line, "panic") {
			fmt.Println("    " + line)
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w", j.label, err)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if found == 0 {
		return fmt.Errorf("%s: -test.bench %q gave no results", j.label, j.bench)
	}
	return nil
}

// summary is a result's headline figures, for the progress lines.
func summary(s Sample) string {
	var parts []string
	for _, u := range []struct{ unit, label string }{
		{"transitions/s", "transitions/s"}, {"calls/s", "calls/s"}, {"p50-µs", "µs p50"}, {"cpu-µs/op", "CPU µs/op"},
		{"allocs/op", "allocs/op"}, {"list-p99-µs", "µs list p99"}, {"stuck-p99-µs", "µs stuck p99"}, {"B/finished-run", "B/finished run"},
	} {
		if v, ok := s[u.unit]; ok {
			parts = append(parts, thousands(v)+" "+u.label)
		}
	}
	// The paired benchmarks' ratios (their allocations mix the sides).
	for _, u := range []string{"core/bare", "grpc/bare", "embedded/redis", "mcp/noop", "bound/noop", "mcp/bound", "free-door/noop"} {
		if v, ok := s[u]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", u, v))
		}
	}
	return strings.Join(parts, ", ")
}

// workspace is the repository's root and a temporary folder for test
// binaries and profiles; done removes the folder.
func workspace(ctx context.Context, pattern string) (root, tmp string, done func(), err error) {
	if root, err = repoRoot(ctx); err != nil {
		return "", "", nil, err
	}
	if tmp, err = os.MkdirTemp("", pattern); err != nil {
		return "", "", nil, err
	}
	return root, tmp, func() { _ = os.RemoveAll(tmp) }, nil
}

// repoRoot is the folder of the go.work the go command uses.
func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		return "", fmt.Errorf("run bench inside the repository (go env GOWORK is empty)")
	}
	return filepath.Dir(work), nil
}
