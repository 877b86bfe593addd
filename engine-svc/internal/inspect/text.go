package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/realm-go/realm/engine-svc/internal/health"
	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/identity"
)

// cutAt is where Input and Output values are cut (cli spec §3.2).
const cutAt = 120

// jsonText writes a value as compact JSON without HTML escaping, as the
// record holds it. Map keys come out sorted: the decoded record has lost
// the writer's key order, so sorted is the one stable order we have.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// A value that came out of JSON always goes back in; this is for
		// hand-built records only, and says so instead of failing.
		return fmt.Sprintf("(not JSON: %v)", err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// cut shortens s to its first n characters followed by "…" when it is
// longer: "cut after its n-th character", as the quote-check warning words
// the same rule (handlers page).
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := range s {
		if i == n {
			return s[:k] + "…"
		}
		i++
	}
	return s
}

// clean escapes control characters in free text from the record so one
// value stays on one line: tab as \t, newline as \n, ESC as \u001b (cli
// spec §2.6 "as realm run inspect does").
func clean(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isControl covers C0, DEL, C1 and the two Unicode line separators.
func isControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029
}

// quoted writes names as 'a', 'b'.
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + clean(n) + "'"
	}
	return strings.Join(q, ", ")
}

// list writes names as a, b, or (none).
func list(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	c := make([]string, len(names))
	for i, n := range names {
		c[i] = clean(n)
	}
	return strings.Join(c, ", ")
}

// program renders a holder as every human output names a program (cli spec
// §1.5).
func program(h *record.Holder) string {
	if h == nil {
		return identity.UnprintableName
	}
	return identity.Words(h.By, h.BySource, clean(h.Channel))
}

// ago writes how long before now t was, as the CLI writes ages.
func ago(t, now time.Time) string { return health.Age(now.Sub(t)) }

// isoTime writes a record time as the record does (UTC, milliseconds); a
// time that does not parse is shown as stored.
func isoTime(s string) string {
	if t := record.ParseTime(s); !t.IsZero() {
		return record.FormatTime(t)
	}
	return clean(s)
}

// plural picks a word by count.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
