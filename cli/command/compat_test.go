package command

import (
	"path/filepath"
	"strings"
	"testing"
)

// The original's --project and --extensions-module are accepted where the
// spec has them, so its scripts keep working, and a set one says it
// changes nothing.
func TestProjectFlagsAreAcceptedAndSayTheyChangeNothing(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1")
	for _, path := range projectFlagCommands {
		r := realm(nil, append(path, "--help")...)
		if r.code != 0 || !strings.Contains(r.stdout, "--project") || !strings.Contains(r.stdout, "--extensions-module") {
			t.Errorf("realm %s --help: exit %d\n%s", strings.Join(path, " "), r.code, r.stdout)
		}
	}
	eachBackend(t, func(t *testing.T, l *live) {
		r := l.realm(nil, "workflow", "validate", filepath.Join("testdata", "support.yaml"), "--extensions-module", "./ext.js", "--project", ".")
		want := "Note: --project has no effect here: handlers run in handler runners registered with engine-svc, which reads no realm.yaml. Start the runner that serves this workflow's handlers instead.\n" +
			"Note: --extensions-module has no effect here: handlers run in handler runners registered with engine-svc, which reads no realm.yaml. Start the runner that serves this workflow's handlers instead.\n"
		if r.code != 0 || r.stdout != "Valid: support v1 (2 steps)\n" || r.stderr != want {
			t.Errorf("exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
		}
	})
}
