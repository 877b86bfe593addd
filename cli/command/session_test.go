package command

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// session runs realm command lines in order against one live engine and
// keeps a transcript: each command line, what it printed and its exit
// code. The transcript, masked, is the golden file: one scripted run that
// shows every command's output as a user sees it.
type session struct {
	t     *testing.T
	realm func(env map[string]string, args ...string) result
	names map[string]string // real id → stable name, so masks keep identity
	out   strings.Builder
}

// do runs one command line, records it and returns its result.
func (s *session) do(args ...string) result {
	s.t.Helper()
	r := s.realm(map[string]string{"REALM_OPERATOR": "ops@example"}, args...)
	fmt.Fprintf(&s.out, "$ realm %s\n", strings.Join(args, " "))
	s.out.WriteString(r.stdout)
	if r.stderr != "" {
		s.out.WriteString("[stderr]\n" + r.stderr)
	}
	fmt.Fprintf(&s.out, "[exit %d]\n\n", r.code)
	return r
}

// name gives a real id a stable name in the transcript.
func (s *session) name(id, as string) {
	if id != "" {
		s.names[id] = as
	}
}

var (
	rfc3339RE  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	enUSTimeRE = regexp.MustCompile(`\d{1,2}/\d{1,2}/\d{4}, \d{1,2}:\d\d:\d\d [AP]M`)
	hexRE      = regexp.MustCompile(`\b[0-9a-f]{32,64}\b`)
	msRE       = regexp.MustCompile(`\b\d+(\.\d+)?(ms|µs|s)\b`)
	agoRE      = regexp.MustCompile(`\b\d+[smhd] ago\b`)
	idleRE     = regexp.MustCompile(`"duration_ms": \d+`)
	kbRE       = regexp.MustCompile(`\(\d+(\.\d+)? KB\)`)
)

// transcript is the session's output with ids, times and durations masked.
func (s *session) transcript() string {
	out := s.out.String()
	for id, as := range s.names {
		out = strings.ReplaceAll(out, id, as)
	}
	out = uuidText.ReplaceAllString(out, "<uuid>")
	out = rfc3339RE.ReplaceAllString(out, "<time>")
	out = enUSTimeRE.ReplaceAllString(out, "<local-time>")
	out = hexRE.ReplaceAllString(out, "<hex>")
	out = agoRE.ReplaceAllString(out, "<n> ago")
	out = idleRE.ReplaceAllString(out, `"duration_ms": <n>`)
	out = msRE.ReplaceAllString(out, "<dur>")
	out = kbRE.ReplaceAllString(out, "(<n> KB)")
	return out
}

func jsonField(t *testing.T, s string, path ...string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	str, _ := v.(string)
	return str
}

// One scripted run through the command line, on each store; both stores
// print the same transcript, and it is the golden file.
func TestScriptedSession(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		s := &session{t: t, realm: l.realm, names: map[string]string{}}
		// support.yaml with a precondition on send, for replay to check.
		work := t.TempDir()
		s.names[work] = "<work>"
		b, err := os.ReadFile(filepath.Join("testdata", "support.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		wf := filepath.Join(work, "support.yaml")
		writeFile(t, wf, strings.Replace(string(b), "    depends_on: [draft]\n", "    depends_on: [draft]\n    preconditions: [\"draft.choice == 'send'\"]\n", 1))
		s.do("workflow", "validate", wf)
		s.do("workflow", "register", wf)
		s.do("workflow", "validate", "--registered", "support")
		s.do("workflow", "validate", "--registered", "nope")
		s.do("workflow", "validate", "--registered", "support", wf)
		s.do("workflow", "list")

		r := s.do("run", "start", "support", "--params", `{"ticket":"T-1"}`)
		run := jsonField(t, r.stdout, "run_id")
		s.name(run, "<run-1>")
		s.do("run", "step", run, "draft", "--params", `{"wrong":1}`)
		r = s.do("run", "step", run, "draft", "--params", `{"reply":"Sorry."}`)
		gate := jsonField(t, r.stdout, "gate", "gate_id")
		s.name(gate, "<gate-1>")
		s.do("run", "state", run)
		s.do("run", "list", "--workflow", "support")
		s.do("run", "inspect", run)
		s.do("run", "respond", run, "--gate", gate, "--choice", "maybe")
		s.do("run", "respond", run, "--gate", gate, "--choice", "send")
		s.do("run", "advance", run)
		s.do("run", "attempts", run)
		s.do("run", "attempts", run, "--json")
		s.do("run", "inspect", run, "--verbose", "--check-drift")
		dir := t.TempDir()
		s.names[dir] = "<dir>"
		s.do("run", "export", run, "--out", dir)
		s.do("run", "export", run, "--out", dir)
		s.do("run", "resume", run, "--from", "draft")
		s.do("run", "reclaim", run)
		s.do("run", "drain", run)

		r = s.do("run", "start", "support", "--params", `{"ticket":"T-2"}`)
		other := jsonField(t, r.stdout, "run_id")
		s.name(other, "<run-2>")
		r = s.do("run", "step", other, "draft", "--params", `{"reply":"Hello."}`)
		s.name(jsonField(t, r.stdout, "gate", "gate_id"), "<gate-2>")
		s.do("run", "list")
		s.do("run", "diff", run, other)
		s.do("run", "abandon", other, "--reason", "duplicate ticket")
		s.do("run", "purge", other)

		r = s.do("run", "start", "support", "--params", `{"ticket":"T-3"}`)
		third := jsonField(t, r.stdout, "run_id")
		s.name(third, "<run-3>")
		s.do("run", "abandon", third, "--reason", "duplicate ticket")
		s.do("run", "abandon", third)
		s.do("run", "inspect", third)
		s.do("run", "purge", third)
		s.do("run", "purge", third, "--force")
		s.do("run", "inspect", third)
		s.do("run", "cleanup", "--older-than", "1h", "--dry-run")
		s.do("run", "list", "--status", "completed", "--json")

		s.do("run", "replay", run)
		s.do("run", "replay", run, "--with", "draft.choice=discard")
		s.do("run", "replay", run, "--with", "draft.choice")
		s.do("run", "gc", "--older-than", "1h")
		s.do("run", "gc", "--older-than", "10m")
		s.do("run", "gc", "--heal")
		s.do("run", "reconcile", "--dry-run")
		s.do("run", "migrate")
		s.do("run", "migrate", "--stamp-seals")
		s.do("workflow", "migrate")
		s.do("workflow", "init", filepath.Join(work, "my-flow"))
		s.do("workflow", "init", filepath.Join(work, "my-flow"))

		golden(t, "session.txt", s.transcript())
	})
}
