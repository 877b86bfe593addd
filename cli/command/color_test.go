package command

import (
	"bytes"
	"os"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func TestColourOnlyOnATerminalWithoutNoColor(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	if newPaint(&bytes.Buffer{}, env(nil)).on {
		t.Error("a buffer got colour")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if newPaint(f, env(nil)).on {
		t.Error("a file got colour")
	}
	if newPaint(os.Stdout, env(map[string]string{"NO_COLOR": "1"})).on {
		t.Error("NO_COLOR was ignored")
	}
	if newPaint(os.Stdout, env(map[string]string{"TERM": "dumb"})).on {
		t.Error("TERM=dumb was ignored")
	}
	on := paint{on: true}
	for phase, want := range map[realmv1.RunPhase]string{
		realmv1.RunPhase_RUN_PHASE_COMPLETED:    "\x1b[32mcompleted\x1b[0m",
		realmv1.RunPhase_RUN_PHASE_FAILED:       "\x1b[31mfailed\x1b[0m",
		realmv1.RunPhase_RUN_PHASE_ABANDONED:    "\x1b[31mabandoned\x1b[0m",
		realmv1.RunPhase_RUN_PHASE_GATE_WAITING: "\x1b[36mgate_waiting\x1b[0m",
		realmv1.RunPhase_RUN_PHASE_RUNNING:      "\x1b[33mrunning\x1b[0m",
	} {
		if got := on.phase(phase); got != want {
			t.Errorf("%v: %q, want %q", phase, got, want)
		}
		if got := (paint{}).phase(phase); got == want {
			t.Errorf("%v coloured while off", phase)
		}
	}
}
