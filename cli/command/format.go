package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// printJSON writes v as indented JSON. HTML escaping is off: placeholders
// such as "<billing|bug>" must print as the engine wrote them.
func printJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return refuse("Error: cannot print the reply as JSON: %v", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// printTable writes rows under header, each column padded to its widest
// value plus two spaces (cli.md §2.5); the last column is not padded.
func printTable(w io.Writer, header []string, rows [][]string) {
	widths := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for _, r := range append([][]string{header}, rows...) {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(c))+2))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// number prints a workflow version the way YAML wrote it: 1, not 1.0.
func number(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// plural picks "<n> one" or "<n> many".
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// localTime renders t as the original's en-US toLocaleString does
// ("10/2/2026, 1:52:37 AM") in the machine's zone (cli.md §3.1; the
// locale is fixed to en-US here, a documented choice).
func localTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("1/2/2006, 3:04:05 PM")
}

// age renders a duration as run list does: 0m, 1h 29m, 2d 0h.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	mins := int(d / time.Minute)
	switch {
	case mins < 60:
		return fmt.Sprintf("%dm", mins)
	case mins < 24*60:
		return fmt.Sprintf("%dh %dm", mins/60, mins%60)
	}
	return fmt.Sprintf("%dd %dh", mins/(24*60), (mins%(24*60))/60)
}

var durationRE = regexp.MustCompile(`^(\d+)(d|h|m)$`)

// parseDuration reads the CLI's duration grammar (cli.md §1.2): a whole
// number and d, h or m. A bare 0 is refused; zero is written 0m.
func parseDuration(s string) (time.Duration, error) {
	m := durationRE.FindStringSubmatch(s)
	if m == nil {
		return 0, refuse("Invalid duration '%s'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > int64(100*365*24*60) {
		return 0, refuse("Invalid duration '%s'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m", s)
	}
	unit := map[string]time.Duration{"d": 24 * time.Hour, "h": time.Hour, "m": time.Minute}[m[2]]
	return time.Duration(n) * unit, nil
}
