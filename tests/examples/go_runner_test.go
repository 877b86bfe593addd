// Package examples checks the example modules under examples/ that are not
// in go.work: each builds and passes its tests as a module of its own, the
// way a project outside this repository uses Realm's packages.
package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoRunnerModuleBuildsAndPassesOnItsOwn runs, in examples/go-runner
// and outside the workspace (GOWORK=off), what its author would: go mod
// tidy (which must change nothing), go vet, go build and go test. Offline:
// the module's go.sum and the module cache hold every dependency, and its
// replace lines point at this checkout's pkg and engine-svc.
func TestGoRunnerModuleBuildsAndPassesOnItsOwn(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and tests a Go module")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "go-runner"))
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local",
		// -mod=mod: go.mod is the module's own, never vendored;
		// -buildvcs=false: the checkout's git state is not the module's.
		"GOFLAGS=-mod=mod -buildvcs=false")
	for _, args := range [][]string{
		{"mod", "tidy", "-diff"},
		{"vet", "./..."},
		{"build", "-o", t.TempDir(), "./..."},
		{"test", "-count=1", "./..."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
	}
}
