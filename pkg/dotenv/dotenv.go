// Package dotenv reads .env files: KEY=value lines, as the realm command
// (its own .env) and a deployment manifest's dotenv secret source read
// them. Reading never touches the process environment; the caller decides
// what a value overrides.
package dotenv

import (
	"bufio"
	"bytes"
	"strings"
)

// Parse returns the KEY=value pairs of a .env file's text; a key given
// twice keeps its last value.
func Parse(raw []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if k, v, ok := ParseLine(sc.Text()); ok {
			out[k] = v
		}
	}
	return out
}

// ParseLine reads one `KEY=value` line: blank lines and # comments are
// skipped, `export ` is allowed, a key with blanks in it is refused, and one
// pair of matching quotes around the value is removed.
func ParseLine(line string) (key, val string, ok bool) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return "", "", false
	}
	line = strings.TrimPrefix(line, "export ")
	key, val, found := strings.Cut(line, "=")
	key = strings.TrimSpace(key)
	if !found || key == "" || strings.ContainsAny(key, " \t") {
		return "", "", false
	}
	val = strings.TrimSpace(val)
	if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
		val = val[1 : len(val)-1]
	}
	return key, val, true
}
