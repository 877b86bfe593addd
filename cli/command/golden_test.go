package command

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// update rewrites the golden files under testdata/golden from what the
// tests print: go test ./cli/ -run TestX -update.
var update = flag.Bool("update", false, "rewrite testdata/golden files")

// uuidText matches a UUID (run, gate and replay ids).
var uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// timeText matches a record time.
var timeText = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)

// maskIDs replaces the given ids by their names, then any other UUID by
// <uuid> and any record time by <ts>, so output compares across runs.
func maskIDs(s string, ids map[string]string) string {
	for id, name := range ids {
		s = strings.ReplaceAll(s, id, name)
	}
	s = uuidText.ReplaceAllString(s, "<uuid>")
	return timeText.ReplaceAllString(s, "<ts>")
}

// golden compares got with testdata/golden/<name>, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(b) != got {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, b)
	}
}
