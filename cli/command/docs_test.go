package command

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// checkedInDocs is docs/cli.md from this package's directory (cli/command).
var checkedInDocs = filepath.Join("..", "..", filepath.FromSlash(DocsPath))

func generatedDocs(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, Command()); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestDocsUpToDate(t *testing.T) {
	want := generatedDocs(t)
	got, err := os.ReadFile(checkedInDocs)
	if err != nil {
		t.Fatalf("%v: run `make docs`", err)
	}
	if string(got) == want {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s is stale: run `make docs` (first difference, line %d:\n  checked in: %q\n  generated:  %q)", DocsPath, i+1, g, w)
		}
	}
}

func TestDocsDeterministic(t *testing.T) {
	if a, b := generatedDocs(t), generatedDocs(t); a != b {
		t.Fatal("two generations of docs/cli.md differ")
	}
}

// specTree is the command tree of shared/spec/cli.md §0 (realm-mcp, a
// separate binary, left out). Ours but not in §0: run start, run step,
// run state, completion.
var specTree = []string{
	"workflow",
	"workflow init", "workflow validate", "workflow register", "workflow watch",
	"workflow list", "workflow run", "workflow test", "workflow migrate",
	"run",
	"run list", "run inspect", "run attempts", "run diff", "run replay", "run export",
	"run respond", "run advance", "run resume", "run abandon", "run cleanup", "run reclaim",
	"run drain", "run purge", "run gc", "run reconcile", "run migrate",
	"agent", "listen", "mcp", "serve", "webhook",
}

// findExact walks path's words down from root by exact name.
func findExact(root *cobra.Command, path string) *cobra.Command {
	c := root
	for _, word := range strings.Fields(path) {
		var next *cobra.Command
		for _, s := range c.Commands() {
			if s.Name() == word {
				next = s
			}
		}
		if next == nil {
			return nil
		}
		c = next
	}
	return c
}

func TestDocsCoverSpecTree(t *testing.T) {
	b, err := os.ReadFile(checkedInDocs)
	if err != nil {
		t.Fatalf("%v: run `make docs`", err)
	}
	docs := string(b)
	root := Command()
	for _, path := range specTree {
		if findExact(root, path) == nil {
			t.Errorf("realm %s: in cli.md §0 but not in this binary", path)
			continue
		}
		if !strings.Contains(docs, "\n## realm "+path+"\n") {
			t.Errorf("realm %s exists but has no section in %s: run `make docs`", path, DocsPath)
		}
	}
}
