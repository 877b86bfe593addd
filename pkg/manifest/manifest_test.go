package manifest_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/realm-go/realm/pkg/manifest"
)

func TestParseChecksTheTopLevel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, wantErr string // wantErr "" accepts
	}{
		{"a version-1 manifest", "version: 1\nhandlers: {}\n", ""},
		{"every section is known", "version: 1\nsecrets: {}\nadapters: {}\nhandlers: {}\nprocessors: {}\nnotifiers: {}\n", ""},
		{"not YAML", "version: [", "is not valid YAML"},
		{"not an object", "- 1\n", "is invalid: manifest: must be object"},
		{"an unknown key", "version: 1\nextra: 1\n", "is invalid: manifest: unknown key 'extra'"},
		{"no version", "handlers: {}\n", "is invalid: manifest: must have required property 'version'"},
		{"another version", "version: 2\n", "is invalid: manifest/version: must be equal to constant"},
		{"a version that is text", "version: '1'\n", "is invalid: manifest/version: must be equal to constant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := manifest.Parse("realm.yaml", []byte(tt.body))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), "Deployment manifest 'realm.yaml' ") || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want it to name the file and say %q", err, tt.wantErr)
			}
		})
	}
}

func TestASectionIsCheckedWhenItIsRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       []manifest.Entry
		wantErr    string
	}{
		{"entries sorted by name, config nil when absent",
			"version: 1\nhandlers:\n  b: { use: x, config: { n: 1 } }\n  a: { use: y }\n",
			[]manifest.Entry{{Name: "a", Use: "y"}, {Name: "b", Use: "x", Config: map[string]any{"n": 1}}}, ""},
		{"an absent section has no entries", "version: 1\n", nil, ""},
		{"an entry without use is the reader's to refuse", "version: 1\nhandlers:\n  a: {}\n", []manifest.Entry{{Name: "a"}}, ""},
		{"a section that is not an object", "version: 1\nhandlers: [a]\n", nil, "manifest/handlers: must be object"},
		{"an entry that is not an object", "version: 1\nhandlers:\n  a: x\n", nil, "manifest/handlers/a: must be object"},
		{"an unknown key in an entry", "version: 1\nhandlers:\n  a: { use: x, with: 1 }\n", nil, "manifest/handlers/a: unknown key 'with'"},
		{"a config that is not an object", "version: 1\nhandlers:\n  a: { use: x, config: 3 }\n", nil, "manifest/handlers/a/config: must be object"},
		{"a bad adapters section does not stop the handlers", "version: 1\nadapters: 3\nhandlers:\n  a: { use: x }\n", []manifest.Entry{{Name: "a", Use: "x"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := manifest.Parse("realm.yaml", []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Handlers()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Handlers() = %#v, %v; want %#v", got, err, tt.want)
			}
		})
	}
}

func TestSecretsComeFromTheDeclaredSourcesInOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("TOKEN='from-dotenv'\nONLY_FILE=f\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"TOKEN": "from-env"}[name]
		return v, ok
	}
	tests := []struct {
		name, secrets string
		want          map[string]string // name → value; "" absent
	}{
		{"dotenv by default", "", map[string]string{"TOKEN": "from-dotenv", "ONLY_FILE": "f"}},
		{"env before dotenv", "secrets: { sources: [env, dotenv] }\n", map[string]string{"TOKEN": "from-env", "ONLY_FILE": "f"}},
		{"env alone", "secrets: { sources: [env] }\n", map[string]string{"TOKEN": "from-env", "ONLY_FILE": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := manifest.Parse(filepath.Join(dir, "realm.yaml"), []byte("version: 1\n"+tt.secrets))
			if err != nil {
				t.Fatal(err)
			}
			lookup, err := f.Secrets(env)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.want {
				if got, _ := lookup(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestResolveSecrets(t *testing.T) {
	t.Parallel()
	lookup := func(name string) (string, bool) { return map[string]string{"A": "x"}[name], name == "A" }
	tests := []struct {
		name    string
		in      any
		want    any
		wantErr string
	}{
		{"references are replaced everywhere; $$ is a dollar",
			map[string]any{"h": []any{"Bearer ${secret:A}"}, "cost": "$$5", "n": 1},
			map[string]any{"h": []any{"Bearer x"}, "cost": "$5", "n": 1}, ""},
		{"nil is an empty config", nil, map[string]any{}, ""},
		{"every unresolved reference is named", map[string]any{"a": "${secret:B}", "b": "${secret:C}"}, nil,
			"unresolved secret references: c.a → ${secret:B}; c.b → ${secret:C}"},
		{"a malformed name is refused", map[string]any{"a": "${secret:lower}"}, nil, "c.a: malformed secret reference '${secret:lower}'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := manifest.ResolveSecrets(tt.in, "c", lookup)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ResolveSecrets = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestFindSecretRefSkipsAnEscapedDollar(t *testing.T) {
	t.Parallel()
	if _, _, found := manifest.FindSecretRef(map[string]any{"a": "$${secret:X}"}, "c"); found {
		t.Error("$${secret:X} is literal text, not a reference")
	}
	where, ref, found := manifest.FindSecretRef(map[string]any{"l": []any{"ok", "t ${secret:X} u"}}, "c")
	if !found || where != "c.l.1" || ref != "${secret:X}" {
		t.Errorf("FindSecretRef = %q, %q, %v", where, ref, found)
	}
}
