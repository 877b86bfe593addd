// Package manifest reads a deployment manifest, realm.yaml (spec §15): the
// file that says which handlers and adapters a deployment builds, with what
// config, and where their secrets come from.
//
//	version: 1
//	secrets: { sources: [env, dotenv] }
//	handlers:
//	  order_total:
//	    use: makeTotal
//	    config: { unit_price: 12.5 }
//	adapters:
//	  ledger:
//	    use: http
//	    config:
//	      base_url: https://ledger.internal.example/api
//	      auth: { type: bearer, token: '${secret:LEDGER_TOKEN}' }
//
// Load checks what every reader relies on (the top level's keys and the
// version); each section is checked by the method that reads it, so a
// runner that serves handlers is not refused for a section it never reads.
// What `use` may name is the reader's business: a runner's registry
// (runner.LoadManifest) or the adapter catalog (the adapter runner).
package manifest

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Sections are the top-level keys a manifest may have.
var Sections = []string{"version", "secrets", "adapters", "handlers", "processors", "notifiers"}

// File is a manifest whose top level has been checked.
type File struct {
	// Path is where it was read from; every error names it.
	Path string
	top  map[string]any
}

// Entry is one entry of the handlers or adapters section.
type Entry struct {
	// Name is the entry's key: the name it is served under.
	Name string
	// Use names what builds it; empty when the entry has no `use`.
	Use string
	// Config is the entry's config block, nil when it has none.
	Config map[string]any
}

// Load reads and checks the manifest at path.
func Load(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("Deployment manifest '%s' cannot be read: %w", path, err)
	}
	return Parse(path, raw)
}

// Parse checks a manifest's text; path names it in errors and is where its
// dotenv secret source is found from.
func Parse(path string, raw []byte) (*File, error) {
	f := &File{Path: path}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("Deployment manifest '%s' is not valid YAML: %w", path, err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, f.Invalid("manifest: must be object")
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !slices.Contains(Sections, k) {
			return nil, f.Invalid("manifest: unknown key '%s'", k)
		}
	}
	version, ok := top["version"]
	if !ok {
		return nil, f.Invalid("manifest: must have required property 'version'")
	}
	if v, isInt := version.(int); !isInt || v != 1 {
		return nil, f.Invalid("manifest/version: must be equal to constant")
	}
	f.top = top
	return f, nil
}

// Invalid is the error for a manifest that breaks its schema, at a JSON
// pointer-like site ("manifest/handlers/x: must be object").
func (f *File) Invalid(format string, args ...any) error {
	return fmt.Errorf("Deployment manifest '%s' is invalid: "+format, append([]any{f.Path}, args...)...)
}

// Errorf is any other error about the manifest, prefixed with its path
// (%w wraps as usual).
func (f *File) Errorf(format string, args ...any) error {
	return fmt.Errorf("Deployment manifest '%s': "+format, append([]any{f.Path}, args...)...)
}

// Handlers returns the handlers section's entries, sorted by name (none
// when the section is absent).
func (f *File) Handlers() ([]Entry, error) { return f.entries("handlers") }

// Adapters returns the adapters section's entries, sorted by name.
func (f *File) Adapters() ([]Entry, error) { return f.entries("adapters") }

// entries checks a section of `name: {use, config}` entries.
func (f *File) entries(section string) ([]Entry, error) {
	if f.top[section] == nil {
		return nil, nil
	}
	m, ok := f.top[section].(map[string]any)
	if !ok {
		return nil, f.Invalid("manifest/%s: must be object", section)
	}
	out := make([]Entry, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		raw, ok := m[name].(map[string]any)
		if !ok {
			return nil, f.Invalid("manifest/%s/%s: must be object", section, name)
		}
		for _, k := range slices.Sorted(maps.Keys(raw)) {
			if k != "use" && k != "config" {
				return nil, f.Invalid("manifest/%s/%s: unknown key '%s'", section, name, k)
			}
		}
		e := Entry{Name: name}
		e.Use, _ = raw["use"].(string)
		if raw["config"] != nil {
			if e.Config, ok = raw["config"].(map[string]any); !ok {
				return nil, f.Invalid("manifest/%s/%s/config: must be object", section, name)
			}
		}
		out = append(out, e)
	}
	return out, nil
}
