package runner_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// Run parses the command line, serves what the Program names and stops
// cleanly, deregistering, when its context ends.
func TestRunServesTheProgramUntilTheContextEnds(t *testing.T) {
	t.Parallel()
	reg := &fakeRegistry{}
	addr := startRegistry(t, reg)
	dir := t.TempDir()
	path := filepath.Join(dir, "realm.yaml")
	if err := os.WriteFile(path, []byte("version: 1\nhandlers:\n  again:\n    use: show\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var setupSaw string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runner.Run(ctx, []string{"-engine-addr", addr, "-manifest", path, "-shutdown-timeout", "5s", "-lease", "300ms", "-tag", "x"}, runner.Program{
			Name:     "shop",
			Handlers: []runner.Registration{{Name: "show", Handler: echo}},
			Registry: map[string]handler.Handler{"show": echo},
			Flags:    func(fs *flag.FlagSet) { fs.String("tag", "", "a flag of the program's own") },
			Setup: func(_ context.Context, f *runner.Flags) error {
				setupSaw = f.Name + " " + f.Manifest
				f.Logger = quietLogger()
				return nil
			},
		})
	}()
	c := reg.nextOf(t, "Register")
	for c.runnerID == "" {
		c = reg.nextOf(t, "Register")
	}
	var names []string
	for _, h := range c.register.GetHandlers() {
		names = append(names, h.GetName())
	}
	if c.register.GetRunnerName() != "shop" || !slices.Equal(names, []string{"show", "again"}) {
		t.Errorf("registered %q with %v, want shop with [show again]", c.register.GetRunnerName(), names)
	}
	// A renewal: the runner has its id, so stopping deregisters it.
	reg.nextOf(t, "Renew")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after a clean stop", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Run did not return after its context ended")
	}
	if setupSaw != "shop "+path {
		t.Errorf("Setup saw %q", setupSaw)
	}
	if got := reg.nextOf(t, "Deregister"); got.runnerID != c.runnerID {
		t.Errorf("deregistered %q, want %q", got.runnerID, c.runnerID)
	}
}

func TestRunRefusesBeforeServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badManifest := filepath.Join(dir, "bad.yaml")
	dupManifest := filepath.Join(dir, "dup.yaml")
	for p, body := range map[string]string{badManifest: "version: 2\n", dupManifest: "version: 1\nhandlers:\n  show: { use: show }\n"} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	prog := runner.Program{
		Name:     "shop",
		Handlers: []runner.Registration{{Name: "show", Handler: echo}},
		Registry: map[string]handler.Handler{"show": echo},
	}
	failingSetup := prog
	failingSetup.Setup = func(context.Context, *runner.Flags) error { return errors.New("no adapters today") }
	tests := []struct {
		name    string
		args    []string
		p       runner.Program
		wantIs  error
		wantErr string
	}{
		{name: "-help is flag.ErrHelp", args: []string{"-help"}, p: prog, wantIs: flag.ErrHelp},
		{name: "an unknown flag", args: []string{"-bogus"}, p: prog, wantErr: "flag provided but not defined: -bogus"},
		{name: "arguments after the flags", args: []string{"extra"}, p: prog, wantErr: `unexpected arguments: ["extra"]`},
		{name: "a manifest that does not load", args: []string{"-manifest", badManifest}, p: prog,
			wantErr: "Error loading extensions: Deployment manifest '" + badManifest + "' is invalid: manifest/version: must be equal to constant"},
		{name: "a manifest entry that repeats a name in code", args: []string{"-manifest", dupManifest}, p: prog,
			wantIs: runner.ErrDuplicateHandler, wantErr: "Error loading extensions: Extension handler 'show' is declared by both"},
		{name: "Setup's error", p: failingSetup, wantErr: "no adapters today"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			// 127.0.0.1:1: a refusal comes before any dial.
			err := runner.Run(ctx, append([]string{"-engine-addr", "127.0.0.1:1"}, tt.args...), tt.p)
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.wantIs)
			}
			if tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want it to start %q", err, tt.wantErr)
			}
		})
	}
}
