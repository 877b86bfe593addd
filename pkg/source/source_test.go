package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read sends each workflow_context file beside the workflow, and for one it
// cannot read the reader's error, so the run can record it (spec §3.8).
func TestReadSendsContextFilesAndTheErrorsOfUnreadableOnes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("workflow.yaml", "id: w\nworkflow_context:\n  policy: { source: { path: docs/policy.md } }\n  gone: { source: { path: gone.md } }\n  folder: { source: { path: docs } }\n")
	write("docs/policy.md", "Be kind.\n")
	write("schema.json", "{}")

	src, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(src.GetFiles()["docs/policy.md"]) != "Be kind.\n" || string(src.GetFiles()["schema.json"]) != "{}" {
		t.Errorf("files = %v", src.GetFiles())
	}
	for rel, want := range map[string]string{
		"gone.md": "open " + filepath.Join(dir, "gone.md") + ": no such file or directory",
		"docs":    "read " + filepath.Join(dir, "docs") + ": not a regular file",
	} {
		if got := src.GetFileErrors()[rel]; got != want {
			t.Errorf("error for %s = %q, want %q", rel, got, want)
		}
	}
	if len(src.GetFileErrors()) != 2 || strings.Contains(strings.Join(keys(src.GetFiles()), ","), "gone") {
		t.Errorf("errors = %v", src.GetFileErrors())
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
