package command

import (
	"context"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// pollInterval is how often a waiting prompt re-reads the run (cli.md
// §2.6: "polls the run record twice a second").
const pollInterval = 500 * time.Millisecond

// Keys a prompt reacts to. The terminal delivers them as bytes: its own
// line editing and signal keys are off while `workflow run` prompts, so
// that Ctrl+C typed here can be told from a SIGINT sent to the process.
const (
	keyCtrlC     = 0x03
	keyCtrlD     = 0x04
	keyBackspace = 0x08
	keyEscape    = 0x1b
	keyDelete    = 0x7f
)

// isTerminal is Env.IsTerminal's default: is r a terminal?
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// keyboard hands the bytes typed on stdin to prompts. One goroutine reads
// for the whole command; keys is closed at end of input.
type keyboard struct {
	keys chan byte
}

func newKeyboard(r io.Reader) *keyboard {
	k := &keyboard{keys: make(chan byte, 256)}
	go func() {
		defer close(k.keys)
		buf := make([]byte, 256)
		for {
			n, err := r.Read(buf)
			for _, b := range buf[:n] {
				k.keys <- b
			}
			if err != nil {
				return
			}
		}
	}()
	return k
}

// promptEnd says how a prompt ended.
type promptEnd int

const (
	promptAnswered promptEnd = iota // a line was typed (Enter)
	promptLeft                      // Ctrl+C, Ctrl+D or end of input
	promptClosed                    // poll said the question is no longer this prompt's
)

// ask prints label and reads one line, echoing what is typed. Every
// pollInterval it calls poll; when poll reports closed, the prompt ends
// with promptClosed (the caller prints why). A poll error ends it too.
func (k *keyboard) ask(ctx context.Context, out io.Writer, label string, poll func() (bool, error)) (string, promptEnd, error) {
	writeString(out, label)
	var line []byte
	escape := 0 // bytes of an escape sequence (arrow keys …) still to drop
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", promptLeft, ctx.Err()
		case <-tick.C:
			closed, err := poll()
			if err != nil || closed {
				writeString(out, "\n")
				return "", promptClosed, err
			}
		case b, ok := <-k.keys:
			switch {
			case !ok, b == keyCtrlC, b == keyCtrlD:
				writeString(out, "\n")
				return "", promptLeft, nil
			case escape > 0:
				// ESC [ … final byte: the final byte is 0x40–0x7e.
				if escape == 1 && b != '[' && b != 'O' || escape > 1 && b >= 0x40 && b <= 0x7e {
					escape = 0
				} else {
					escape++
				}
			case b == keyEscape:
				escape = 1
			case b == '\r' || b == '\n':
				writeString(out, "\n")
				return string(line), promptAnswered, nil
			case b == keyBackspace || b == keyDelete:
				if len(line) > 0 {
					_, size := utf8.DecodeLastRune(line)
					line = line[:len(line)-size]
					writeString(out, "\b \b")
				}
			case b < 0x20:
				// Other control keys do nothing here.
			default:
				line = append(line, b)
				_, _ = out.Write([]byte{b})
			}
		}
	}
}

func writeString(w io.Writer, s string) { _, _ = io.WriteString(w, s) }
