package command

import (
	"path/filepath"
	"testing"
)

// The structured-output lines of validate (cli.md §2.2): the caveats of a
// step that opted in always print; the summary counts the steps that could
// opt in (and those with caveats); --explain names each; REALM_NO_NUDGE=1
// silences the summary only. None changes the exit code.
func TestValidateNudgesTowardsStructuredOutput(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		wf := filepath.Join("testdata", "strict.yaml")
		caveat := "ℹ Step 'opted_in': structured_output caveat — unenforced_pattern at properties/code\n"
		valid := "Valid: strict v1 (5 steps)\n"
		for _, tc := range []struct {
			name string
			env  map[string]string
			args []string
			want string
		}{
			{"summary", nil, nil, valid + caveat +
				"ℹ 2 steps ready for structured_output: strict (1 with caveats) — run 'realm workflow validate --explain' for detail (REALM_NO_NUDGE=1 to silence).\n"},
			{"explain", nil, []string{"--explain"}, valid + caveat +
				"ℹ Step 'plain': eligible for structured_output: strict — add 'structured_output: strict' to opt in.\n" +
				"ℹ Step 'bounded_text': eligible for structured_output: strict — add 'structured_output: strict' to opt in.\n"},
			{"silenced", map[string]string{"REALM_NO_NUDGE": "1"}, nil, valid + caveat},
			{"silenced but explained", map[string]string{"REALM_NO_NUDGE": "1"}, []string{"--explain"}, valid + caveat +
				"ℹ Step 'plain': eligible for structured_output: strict — add 'structured_output: strict' to opt in.\n" +
				"ℹ Step 'bounded_text': eligible for structured_output: strict — add 'structured_output: strict' to opt in.\n"},
		} {
			r := l.realm(tc.env, append([]string{"workflow", "validate", wf}, tc.args...)...)
			if r.code != 0 || r.stdout != tc.want {
				t.Errorf("%s: exit %d\n got %q\nwant %q\nstderr %q", tc.name, r.code, r.stdout, tc.want, r.stderr)
			}
		}
		// JSON output carries no nudge: one object, nothing else.
		if r := l.realm(nil, "workflow", "validate", wf, "--json"); r.code != 0 || decodeJSON(t, r.stdout)["valid"] != true {
			t.Errorf("--json: exit %d %q", r.code, r.stdout)
		}
	})
}
