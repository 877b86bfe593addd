package command

import (
	"io"
	"os"

	"golang.org/x/term"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

// paint colours the words a person scans for (PASS, FAIL) when w is a
// terminal, NO_COLOR is unset (https://no-color.org) and TERM is not
// "dumb". Pipes, files and CI logs get plain text.
type paint struct{ on bool }

func newPaint(w io.Writer, getenv func(string) string) paint {
	if getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return paint{}
	}
	f, ok := w.(*os.File)
	return paint{on: ok && term.IsTerminal(int(f.Fd()))}
}

func (p paint) wrap(code, s string) string {
	if !p.on {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p paint) green(s string) string { return p.wrap("32", s) }
func (p paint) red(s string) string   { return p.wrap("31", s) }
func (p paint) bold(s string) string  { return p.wrap("1", s) }

// phase is a run phase's word in the colour `realm run list` gives it
// (cli.md §3.1): green completed, red failed or abandoned, cyan
// gate_waiting, yellow otherwise.
func (p paint) phase(ph realmv1.RunPhase) string {
	w := reply.PhaseWord(ph)
	switch ph {
	case realmv1.RunPhase_RUN_PHASE_COMPLETED:
		return p.green(w)
	case realmv1.RunPhase_RUN_PHASE_FAILED, realmv1.RunPhase_RUN_PHASE_ABANDONED:
		return p.red(w)
	case realmv1.RunPhase_RUN_PHASE_GATE_WAITING:
		return p.wrap("36", w)
	}
	return p.wrap("33", w)
}
