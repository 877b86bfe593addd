package workflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefinitionRoundTripsThroughJSON(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"testdata/expense_claim.yaml", "testdata/everything.yaml"} {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			d, r := Load(src, LoadOptions{Path: f, Files: map[string][]byte{"profiles/critic.md": []byte("Be fair.\n")}})
			if d == nil {
				t.Fatal(r.Text())
			}
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var back Definition
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d, &back) {
				b2, _ := json.Marshal(&back)
				t.Fatalf("round trip changed the definition:\n%s\n%s", b, b2)
			}
		})
	}
}

// TestExamplesLoadValid keeps the product's example workflows loadable.
func TestExamplesLoadValid(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d example files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			d, r := Load(src, LoadOptions{Path: f, Strict: true})
			if d == nil {
				t.Fatalf("example refused:\n%s", r.Text())
			}
			if !strings.HasPrefix(r.Text(), "Valid: ") {
				t.Fatalf("text:\n%s", r.Text())
			}
		})
	}
}

// FuzzLoad checks that no input makes Load panic, and that the report and
// the definition agree. In plain `go test` only the seed corpus runs.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	examples, _ := filepath.Glob("../../examples/*.yaml")
	for _, p := range append(seeds, examples...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(""))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("id: w\nname: W\nversion: .nan\nsteps:\n  a: &s { description: A, execution: auto, config: { x: .inf } }\n  b: *s\n"))
	f.Add([]byte("templates:\n  t:\n    steps: { s: { description: '{{ prefix }}', execution: auto } }\nsteps:\n  u: { use_template: t, prefix: p }\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		d, r := Load(src, LoadOptions{Files: map[string][]byte{}})
		if r == nil {
			t.Fatal("nil report")
		}
		if (d != nil) != r.Valid {
			t.Fatalf("definition presence %v, Valid %v", d != nil, r.Valid)
		}
		_ = r.Text()
		if _, err := json.Marshal(r.JSON()); err != nil {
			t.Fatalf("report JSON: %v", err)
		}
		if d != nil {
			if _, err := json.Marshal(d); err != nil {
				t.Fatalf("definition JSON: %v", err)
			}
		}
	})
}
