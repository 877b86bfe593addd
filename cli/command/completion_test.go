package command

import (
	"strings"
	"testing"
)

// cobra's bash and zsh scripts are dynamic: they hold no command names but
// call `realm __complete <words>` at each <TAB>, which answers from the
// live command tree. So the test checks both halves: each script is printed
// and hooks `realm __complete`, and that hook offers the subcommands.
func TestCompletionScripts(t *testing.T) {
	run := runner("127.0.0.1:1")
	for _, shell := range []string{"bash", "zsh"} {
		r := run(nil, "completion", shell)
		if r.code != ExitOK || r.stderr != "" {
			t.Fatalf("realm completion %s: exit %d, stderr %q", shell, r.code, r.stderr)
		}
		for _, want := range []string{"realm", "__complete", "_realm"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("realm completion %s: script lacks %q:\n%.400s", shell, want, r.stdout)
			}
		}
	}
}

func TestCompletionOffersSubcommands(t *testing.T) {
	run := runner("127.0.0.1:1")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"run", "workflow", "agent", "listen", "mcp", "serve", "completion"}},
		{[]string{"__complete", "run", ""}, []string{"list", "inspect", "respond", "export"}},
		{[]string{"__complete", "workflow", ""}, []string{"validate", "register", "list"}},
	} {
		r := run(nil, tc.args...)
		if r.code != ExitOK {
			t.Fatalf("realm %s: exit %d, stderr %q", strings.Join(tc.args, " "), r.code, r.stderr)
		}
		offered := map[string]bool{}
		for _, line := range strings.Split(r.stdout, "\n") {
			name, _, _ := strings.Cut(line, "\t")
			offered[name] = true
		}
		for _, w := range tc.want {
			if !offered[w] {
				t.Errorf("realm %s does not offer %q:\n%s", strings.Join(tc.args, " "), w, r.stdout)
			}
		}
	}
}

func TestHelpListsCompletion(t *testing.T) {
	r := runner("127.0.0.1:1")(nil, "--help")
	if r.code != ExitOK || !strings.Contains(r.stdout, "\n  completion  ") {
		t.Errorf("realm --help: exit %d, no completion command listed:\n%s", r.code, r.stdout)
	}
}
