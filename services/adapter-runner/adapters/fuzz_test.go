package adapters

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/realm-go/realm/pkg/manifest"
)

// FuzzManifest checks that no manifest text makes the adapter manifest
// loader panic, and that what it accepts keeps the refusals: only known
// top-level sections, only the entries the adapters section names, and an
// http entry's config with known keys only. In plain `go test` only the
// seed corpus (testdata/fuzz/FuzzManifest) runs.
func FuzzManifest(f *testing.F) {
	f.Add([]byte("version: 1\nadapters:\n  ledger:\n    use: http\n    config:\n      base_url: https://ledger.example/api\n      allow_hosts: [ledger.internal:8443]\n      auth: { type: bearer, token: '${secret:LEDGER_TOKEN}' }\n"))
	f.Add([]byte("version: 1\nsecrets: { sources: [env] }\nadapters:\n  d: { use: filesystem }\n  x: { use: ./x.mjs#X }\n"))
	f.Add([]byte("version: 1\nadapters:\n  l: { use: http, config: { base_url: https://x, allow_private_network: true } }\n"))
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, raw []byte) {
		mf, err := manifest.Parse(root+"/realm.yaml", raw)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty refusal")
			}
			return
		}
		env := map[string]string{"LEDGER_TOKEN": "t"}
		adps, err := buildManifest(mf, Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}, root)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "Deployment manifest '") {
				t.Fatalf("a refusal that does not name the manifest: %v", err)
			}
			return
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("accepted text that is not a YAML object: %v", err)
		}
		for k := range doc {
			if !slices.Contains(manifest.Sections, k) {
				t.Fatalf("accepted unknown section %q", k)
			}
		}
		section, _ := doc["adapters"].(map[string]any)
		if got, want := slices.Sorted(maps.Keys(adps)), slices.Sorted(maps.Keys(section)); !slices.Equal(got, want) {
			t.Fatalf("adapters %v, want the section's %v", got, want)
		}
		for name, a := range adps {
			h, ok := a.(*HTTP)
			if !ok {
				continue
			}
			for k := range h.construction {
				if !slices.Contains(constructionKeys, k) {
					t.Fatalf("adapters.%s: accepted unknown config key %q", name, k)
				}
			}
		}
	})
}
