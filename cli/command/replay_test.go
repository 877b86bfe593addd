package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replayable starts a replayable run and answers classify (and, unless
// partial, draft, after which the engine sends and the run completes).
func (l *live) replayable(partial bool) string {
	l.t.Helper()
	run := l.start("replayable", map[string]any{"ticket": "T-1"}).GetRunId()
	l.answer(run, "classify", map[string]any{"category": "billing", "confidence": 0.9})
	if !partial {
		l.answer(run, "draft", map[string]any{"reply": "We refunded the charge."})
	}
	return run
}

// On the real engine: a replay re-checks the recorded preconditions; an
// override that lowers classify.confidence blocks draft; --save writes the
// documented file; an open run gets the partial-replay warning.
func TestRunReplay(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("replayable")
		done := l.replayable(false)
		open := l.replayable(true)
		ids := map[string]string{done: "<run>", open: "<open-run>"}
		cases := []struct {
			name   string
			args   []string
			golden string
		}{
			{"recorded outputs change nothing", []string{done}, "replay-unchanged.txt"},
			{"an override flips PASS to BLOCKED", []string{done, "--with", "classify.confidence=0.5", "--with", "classify.category=bug"}, "replay-blocked.txt"},
			{"an override that keeps it passing", []string{done, "--with", "classify.confidence=0.95"}, "replay-still-passing.txt"},
			{"text where a number is needed blocks", []string{done, "--with", "classify.confidence='0.9'"}, "replay-quoted.txt"},
			{"an open run is a partial replay", []string{open, "--with", "classify.confidence=0.1"}, "replay-partial.txt"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				res := l.realm(nil, append([]string{"run", "replay"}, c.args...)...)
				if res.code != 0 || res.stderr != "" {
					t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
				}
				golden(t, c.golden, maskIDs(res.stdout, ids))
			})
		}

		t.Run("save writes the replay file", func(t *testing.T) {
			home := t.TempDir()
			res := l.realm(map[string]string{"HOME": home}, "run", "replay", done, "--with", "classify.confidence=0.5", "--save")
			if res.code != 0 || res.stderr != "" {
				t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
			}
			golden(t, "replay-saved.txt", maskIDs(res.stdout, ids))
			last := strings.TrimSpace(res.stdout[strings.LastIndex(res.stdout, "Saved replay: ")+len("Saved replay: "):])
			if !strings.HasPrefix(last, "rpl_") || !uuidText.MatchString(last) {
				t.Fatalf("replay id = %q", last)
			}
			b, err := os.ReadFile(filepath.Join(home, ".realm", "replays", last+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var saved savedReplay
			if err := json.Unmarshal(b, &saved); err != nil {
				t.Fatal(err)
			}
			if saved.ReplayID != last || saved.RunID != done || saved.WorkflowID != "replayable" || saved.Partial || saved.RunPhase != "completed" {
				t.Errorf("saved = %+v", saved)
			}
			if len(saved.Overrides) != 1 || saved.Overrides[0] != (override{Step: "classify", Field: "confidence", Raw: "0.5", Value: 0.5}) {
				t.Errorf("overrides = %+v", saved.Overrides)
			}
			if len(saved.Steps) != 3 || saved.Steps[1].Step != "draft" || saved.Steps[1].Original != "PASS" || saved.Steps[1].Replay != "BLOCKED" || !saved.Steps[1].Changed {
				t.Errorf("steps = %+v", saved.Steps)
			}
			entries, _ := os.ReadDir(filepath.Join(home, ".realm", "replays"))
			if len(entries) != 1 {
				t.Errorf("replays folder holds %d files, want only the replay", len(entries))
			}
		})

		t.Run("diff compares two saved replays", func(t *testing.T) {
			home := map[string]string{"HOME": t.TempDir()}
			saved := func(args ...string) string {
				res := l.realm(home, append([]string{"run", "replay", done, "--save"}, args...)...)
				if res.code != 0 {
					t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
				}
				return strings.TrimSpace(res.stdout[strings.LastIndex(res.stdout, "rpl_"):])
			}
			a := saved("--with", "classify.confidence=0.5")
			b := saved("--with", "classify.confidence=0.95", "--with", "classify.category=bug")
			none := saved()
			res := l.realm(home, "run", "diff", a, b)
			if res.code != 0 || res.stderr != "" {
				t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
			}
			golden(t, "replay-diff.txt", maskIDs(res.stdout, map[string]string{a: "<rpl-a>", b: "<rpl-b>", done: "<run>"}))
			res = l.realm(home, "run", "diff", none, a)
			if res.code != 0 || !strings.Contains(res.stdout, "Overrides A: none\n") {
				t.Errorf("diff without overrides: exit %d\n%s", res.code, res.stdout)
			}
			missing := "rpl_00000000-0000-4000-8000-000000000000"
			want(t, l.realm(home, "run", "diff", a, missing), 1, "", "Replay not found: "+missing+"\n")
			want(t, l.realm(home, "run", "diff", "rpl_../../x", a), 1, "", "Replay not found: rpl_../../x\n")
		})

		t.Run("refusals", func(t *testing.T) {
			for _, c := range []struct {
				name   string
				args   []string
				stderr string
			}{
				{"missing =", []string{done, "--with", "classify"}, "Invalid override 'classify': missing '='\n"},
				{"missing .", []string{done, "--with", "confidence=1"}, "Invalid override 'confidence=1': missing '.'\n"},
				{"empty field", []string{done, "--with", "classify.=1"}, "Invalid override 'classify.=1': missing '.'\n"},
				{"unknown run", []string{"r-missing"}, "Run not found: r-missing\n"},
				{"no run", nil, "Error: accepts 1 arg(s), received 0\n"},
			} {
				t.Run(c.name, func(t *testing.T) {
					home := t.TempDir()
					want(t, l.realm(map[string]string{"HOME": home}, append([]string{"run", "replay"}, c.args...)...), 1, "", c.stderr)
					if _, err := os.Stat(filepath.Join(home, ".realm")); !os.IsNotExist(err) {
						t.Errorf("a refused replay wrote into HOME: %v", err)
					}
				})
			}
		})
	})
}

func TestOverrideValue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw  string
		want any
	}{
		{"true", true}, {"false", false}, {"0.5", 0.5}, {"-3", -3.0}, {"1e3", 1000.0},
		{"'0.5'", "0.5"}, {`"yes"`, "yes"}, {"bug", "bug"}, {"0x10", "0x10"}, {"Inf", "Inf"}, {"", ""}, {"'", "'"},
	} {
		if got := overrideValue(c.raw); got != c.want {
			t.Errorf("overrideValue(%q) = %#v, want %#v", c.raw, got, c.want)
		}
	}
}
