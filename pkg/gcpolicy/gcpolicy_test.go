package gcpolicy

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// keepRuntime restores the GC target and memory limit after a test.
func keepRuntime(t *testing.T) {
	percent, limit := currentPercent(), debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}

func cgroup(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestApplySetsTheTargetAndALimitUnderTheContainers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     map[string]string
		env       map[string]string
		percent   int
		wantPct   int
		wantFrom  string
		wantLimit int64
		limitFrom string // a suffix of Applied.LimitFrom
	}{
		{name: "cgroup v2 limit: 90% of it", files: map[string]string{"memory.max": "1073741824\n"}, percent: 400,
			wantPct: 400, wantFrom: "flag", wantLimit: 966367641, limitFrom: "memory.max"},
		{name: "cgroup v1 limit", files: map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, percent: 200,
			wantPct: 200, wantFrom: "flag", wantLimit: 483183820, limitFrom: "memory.limit_in_bytes"},
		{name: "cgroup v2 without a limit sets none", files: map[string]string{"memory.max": "max\n"}, percent: 400,
			wantPct: 400, wantFrom: "flag", wantLimit: math.MaxInt64, limitFrom: "none"},
		{name: "cgroup v1 without a limit sets none", files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, percent: 400,
			wantPct: 400, wantFrom: "flag", wantLimit: math.MaxInt64, limitFrom: "none"},
		{name: "no cgroup sets none", percent: 400, wantPct: 400, wantFrom: "flag", wantLimit: math.MaxInt64, limitFrom: "none"},
		{name: "GOMEMLIMIT wins over the cgroup", files: map[string]string{"memory.max": "1073741824\n"}, env: map[string]string{"GOMEMLIMIT": "100MiB"},
			percent: 400, wantPct: 400, wantFrom: "flag", wantLimit: math.MaxInt64, limitFrom: "GOMEMLIMIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keepRuntime(t)
			debug.SetMemoryLimit(math.MaxInt64)
			a, err := Apply(tc.percent, env(tc.env), cgroup(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if a.Percent != tc.wantPct || a.PercentFrom != tc.wantFrom || a.Limit != tc.wantLimit || !strings.HasSuffix(a.LimitFrom, tc.limitFrom) {
				t.Errorf("Apply = %+v, want percent %d from %s, limit %d from …%s", a, tc.wantPct, tc.wantFrom, tc.wantLimit, tc.limitFrom)
			}
			if got := currentPercent(); got != tc.wantPct {
				t.Errorf("the runtime's GC target is %d, want %d", got, tc.wantPct)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("the runtime's memory limit is %d, want %d", got, tc.wantLimit)
			}
		})
	}
}

func TestGOGCInTheEnvironmentWins(t *testing.T) {
	keepRuntime(t)
	debug.SetGCPercent(150) // as the runtime would have from GOGC=150
	a, err := Apply(400, env(map[string]string{"GOGC": "150"}), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a.Percent != 150 || a.PercentFrom != "GOGC" || currentPercent() != 150 {
		t.Errorf("Apply = %+v, runtime target %d; want GOGC's 150 kept", a, currentPercent())
	}
}

func TestApplyRefusesWhatItCannotSet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		percent int
		files   map[string]string
		want    string
	}{
		{"a target under the minimum", 5, nil, "GC target 5: want 10 to 10000"},
		{"a target over the maximum", 20000, nil, "GC target 20000: want 10 to 10000"},
		{"a cgroup file that is not a count", 400, map[string]string{"memory.max": "lots\n"}, `holds "lots", want a byte count or max`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keepRuntime(t)
			before := currentPercent()
			_, err := Apply(tc.percent, env(nil), cgroup(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if currentPercent() != before {
				t.Errorf("a refused target changed the runtime's to %d", currentPercent())
			}
		})
	}
}
