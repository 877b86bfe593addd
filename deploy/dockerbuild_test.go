package deploy

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerStage is a Dockerfile's build stage as this test replays it.
type dockerStage struct {
	args   map[string]string // ARG defaults
	copies [][2]string       // COPY src dst, in order
	builds []string          // the go build command lines (continuations joined)
}

var argRef = regexp.MustCompile(`\$\{([A-Z_]+)\}`)

// parseBuildStage reads the stage up to the second FROM.
func parseBuildStage(t *testing.T, text string) dockerStage {
	t.Helper()
	st := dockerStage{args: map[string]string{}}
	text = strings.ReplaceAll(text, "\\\n", " ")
	froms := 0
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "FROM":
			froms++
		case "ARG":
			if k, v, ok := strings.Cut(f[1], "="); ok {
				st.args[k] = v
			}
		case "COPY":
			if froms == 1 && len(f) == 3 {
				st.copies = append(st.copies, [2]string{f[1], f[2]})
			}
		case "RUN":
			if froms == 1 && strings.Contains(line, "go build") {
				st.builds = append(st.builds, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "RUN")))
			}
		}
	}
	return st
}

// dockerIgnored mirrors the .dockerignore files: no tests, no test data.
func dockerIgnored(path string, d fs.DirEntry) bool {
	if d.IsDir() {
		return d.Name() == "testdata" || d.Name() == ".git" || d.Name() == "bin"
	}
	return strings.HasSuffix(d.Name(), "_test.go") || strings.HasSuffix(d.Name(), ".out")
}

// copyInto copies what `COPY src dst` brings from the repository into root:
// a folder's contents into dst, a file into dst by its name.
func copyInto(t *testing.T, root, src, dst string) {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(repoRoot, src))
	if err != nil || len(matches) == 0 {
		t.Fatalf("COPY %s matches nothing in the repository", src)
	}
	write := func(from, to string) error {
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	}
	for _, m := range matches {
		err := filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if dockerIgnored(p, d) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			if p == m { // a file
				return write(p, filepath.Join(root, dst, filepath.Base(p)))
			}
			rel, err := filepath.Rel(m, p)
			if err != nil {
				return err
			}
			return write(p, filepath.Join(root, dst, rel))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Each image's build stage, replayed without Docker: only the files its
// COPY lines bring in, GOWORK=off as the image sets it, the module cache
// and no network. A module the build needs but the Dockerfile does not
// copy (a replace directive pointing at a folder left out) fails here
// rather than at `make images`.
func TestDockerfileBuildStagesCompileFromWhatTheyCopy(t *testing.T) {
	t.Parallel()
	builds := map[string]map[string]string{ // Dockerfile → ARG overrides
		"engine-svc.Dockerfile": nil, "mcp-svc.Dockerfile": nil, "agent-svc.Dockerfile": nil, "listen-svc.Dockerfile": nil, "notify-svc.Dockerfile": nil,
		"console-svc.Dockerfile":           nil,
		"runner.Dockerfile#example-runner": {"RUNNER": "example-runner"},
		"runner.Dockerfile#adapter-runner": {"RUNNER": "adapter-runner"},
	}
	for name, override := range builds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file, _, _ := strings.Cut(name, "#")
			data, err := os.ReadFile(filepath.Join("docker", file))
			if err != nil {
				t.Fatal(err)
			}
			st := parseBuildStage(t, string(data))
			for k, v := range override {
				st.args[k] = v
			}
			expand := func(s string) string {
				for range 3 { // ARGs may name ARGs
					s = argRef.ReplaceAllStringFunc(s, func(m string) string { return st.args[argRef.FindStringSubmatch(m)[1]] })
				}
				return s
			}
			root := t.TempDir()
			for _, c := range st.copies {
				copyInto(t, root, c[0], c[1])
			}
			if len(st.builds) == 0 {
				t.Fatal("no go build in the build stage")
			}
			for _, b := range st.builds {
				// `go list -deps` resolves the module graph and every
				// imported package exactly as the build does, without
				// compiling: the source is the workspace's, already
				// compiled by every other test.
				line := expand(b)
				dir, _, _ := strings.Cut(strings.TrimPrefix(line, "cd "), " ")
				f := strings.Fields(line)
				pkg := f[len(f)-1]
				c := exec.Command("go", "list", "-deps", "-f", "{{with .Error}}{{.}}{{end}}", pkg)
				c.Dir = filepath.Join(root, dir)
				c.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "GOPROXY=off", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
				if out, err := c.CombinedOutput(); err != nil {
					t.Fatalf("%s (in %s, as `%s`): %v\n%s", pkg, dir, line, err, out)
				}
			}
		})
	}
}
