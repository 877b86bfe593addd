package adapters

import (
	"strings"

	"github.com/realm-go/realm/pkg/manifest"
	"github.com/realm-go/realm/pkg/runner"
)

// LoadManifest builds the adapters a deployment manifest (realm.yaml, spec
// §15) declares under `adapters:`, each registered under its entry name:
//
//	version: 1
//	secrets: { sources: [env, dotenv] }
//	adapters:
//	  ledger:
//	    use: http
//	    config:
//	      base_url: https://ledger.internal.example/api
//	      allow_hosts: [ledger.internal.example]
//	      auth: { type: bearer, token: '${secret:LEDGER_TOKEN}' }
//
// The manifest is read by package manifest; `use` is a catalog name this
// runner has (every catalog name, docs/adapters.md); secret references are resolved from the
// manifest's sources (env: opts.LookupEnv; dotenv: a NAME=value file,
// default .env next to the manifest). An http entry's config has base_url,
// headers, auth (which needs base_url) and allow_hosts: the hosts inside the
// network this entry, and only it, may reach (docs/adapters.md); any other
// key is refused. The other sections are left to their readers.
func LoadManifest(path string, opts Options, fsRoot string) (map[string]runner.Adapter, error) {
	f, err := manifest.Load(path)
	if err != nil {
		return nil, err
	}
	return buildManifest(f, opts, fsRoot)
}

// buildManifest builds the adapters of a parsed manifest.
func buildManifest(f *manifest.File, opts Options, fsRoot string) (map[string]runner.Adapter, error) {
	opts = opts.withDefaults()
	entries, err := f.Adapters()
	if err != nil {
		return nil, err
	}
	out := map[string]runner.Adapter{}
	if entries == nil { // no adapters section
		return out, nil
	}
	lookup, err := f.Secrets(opts.LookupEnv)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name, use, config := e.Name, e.Use, e.Config
		resolved, err := manifest.ResolveSecrets(config, "adapters."+name+".config", lookup)
		if err != nil {
			return nil, f.Errorf("%w", err)
		}
		switch {
		case use == "":
			return nil, f.Errorf("adapters.%s needs 'use:' — a catalog name (adapters) or a module reference './path.js#Export'.", name)
		case builders[use] != nil:
			m, _ := resolved.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			a, err := builders[use](name, m, opts)
			if err != nil {
				return nil, f.Errorf("constructing adapters.%s (use: %s) failed: %w", name, use, err)
			}
			out[name] = a
		case use == NameFilesystem:
			if len(config) > 0 {
				return nil, f.Errorf("adapters.%s — catalog adapter 'filesystem' takes no config; remove the 'config:' block.", name)
			}
			if fsRoot == "" {
				return nil, f.Errorf("adapters.%s — the filesystem adapter is off in this runner (start it with --filesystem-root).", name)
			}
			fs, err := NewFilesystem(fsRoot)
			if err != nil {
				return nil, err
			}
			out[name] = fs
		case strings.Contains(use, "/") || strings.HasSuffix(use, ".js") || strings.HasSuffix(use, ".mjs") || strings.HasSuffix(use, ".ts"):
			return nil, f.Errorf("adapters.%s — module reference '%s' cannot be loaded by the adapter runner; serve a custom adapter from your own runner (pkg/runner).", name, use)
		default:
			return nil, f.Errorf("adapters.%s — unknown catalog adapter '%s'. Valid catalog names: %s. For a custom adapter use a module reference './path.js#ExportName'.", name, use, strings.Join(CatalogNames, ", "))
		}
	}
	return out, nil
}
