package cli

import (
	"io"
	"os"

	"golang.org/x/term"
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
