package adapters

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

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
//	      auth: { type: bearer, token: '${secret:LEDGER_TOKEN}' }
//
// `use` is a catalog name this runner has (http, filesystem); secret
// references are resolved from the manifest's sources (env: lookupEnv;
// dotenv: a NAME=value file, default .env next to the manifest). The other
// sections are left to their readers.
func LoadManifest(path string, opts Options, fsRoot string) (map[string]runner.Adapter, error) {
	opts = opts.withDefaults()
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("Deployment manifest '%s' cannot be read: %w", path, err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("Deployment manifest '%s' is not valid YAML: %w", path, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("Deployment manifest '%s' is invalid: "+format, append([]any{path}, args...)...)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, bad("manifest: must be object")
	}
	for _, k := range sortedKeys(top) {
		switch k {
		case "version", "secrets", "adapters", "handlers", "processors", "notifiers":
		default:
			return nil, bad("manifest: unknown key '%s'", k)
		}
	}
	if _, ok := top["version"]; !ok {
		return nil, bad("manifest: must have required property 'version'")
	}
	if v, isInt := top["version"].(int); !isInt || v != 1 {
		return nil, bad("manifest/version: must be equal to constant")
	}
	if top["adapters"] == nil {
		return map[string]runner.Adapter{}, nil
	}
	entries, ok := top["adapters"].(map[string]any)
	if !ok {
		return nil, bad("manifest/adapters: must be object")
	}
	lookup, err := secretSources(path, top["secrets"], opts.LookupEnv)
	if err != nil {
		return nil, err
	}

	out := map[string]runner.Adapter{}
	for _, name := range sortedKeys(entries) {
		entry, ok := entries[name].(map[string]any)
		if !ok {
			return nil, bad("manifest/adapters/%s: must be object", name)
		}
		for _, k := range sortedKeys(entry) {
			if k != "use" && k != "config" {
				return nil, bad("manifest/adapters/%s: unknown key '%s'", name, k)
			}
		}
		use, _ := entry["use"].(string)
		var config map[string]any
		if entry["config"] != nil {
			if config, ok = entry["config"].(map[string]any); !ok {
				return nil, bad("manifest/adapters/%s/config: must be object", name)
			}
		}
		resolved, err := resolveSecrets(config, "adapters."+name+".config", lookup)
		if err != nil {
			return nil, fmt.Errorf("Deployment manifest '%s': %w", path, err)
		}
		switch {
		case use == "":
			return nil, fmt.Errorf("Deployment manifest '%s': adapters.%s needs 'use:' — a catalog name (adapters) or a module reference './path.js#Export'.", path, name)
		case use == NameHTTP:
			h, err := NewHTTP(name, resolved.(map[string]any), opts)
			if err != nil {
				return nil, fmt.Errorf("Deployment manifest '%s': constructing adapters.%s (use: http) failed: %w", path, name, err)
			}
			out[name] = h
		case use == NameFilesystem:
			if len(config) > 0 {
				return nil, fmt.Errorf("Deployment manifest '%s': adapters.%s — catalog adapter 'filesystem' takes no config; remove the 'config:' block.", path, name)
			}
			if fsRoot == "" {
				return nil, fmt.Errorf("Deployment manifest '%s': adapters.%s — the filesystem adapter is off in this runner (start it with --filesystem-root).", path, name)
			}
			fs, err := NewFilesystem(fsRoot)
			if err != nil {
				return nil, err
			}
			out[name] = fs
		case slices.Contains(CatalogNames, use):
			return nil, fmt.Errorf("Deployment manifest '%s': adapters.%s — catalog adapter '%s' is not built into the adapter runner (it has: filesystem, http).", path, name, use)
		case strings.Contains(use, "/") || strings.HasSuffix(use, ".js") || strings.HasSuffix(use, ".mjs") || strings.HasSuffix(use, ".ts"):
			return nil, fmt.Errorf("Deployment manifest '%s': adapters.%s — module reference '%s' cannot be loaded by the adapter runner; serve a custom adapter from your own runner (pkg/runner).", path, name, use)
		default:
			return nil, fmt.Errorf("Deployment manifest '%s': adapters.%s — unknown catalog adapter '%s'. Valid catalog names: %s. For a custom adapter use a module reference './path.js#ExportName'.", path, name, use, strings.Join(CatalogNames, ", "))
		}
	}
	return out, nil
}

// secretSources returns the lookup the manifest's secrets block describes:
// its sources in order of precedence (default [dotenv]).
func secretSources(manifest string, block any, env func(string) (string, bool)) (func(string) (string, bool), error) {
	sources := []string{"dotenv"}
	dotenv := ".env"
	explicitDotenv := false
	if m, ok := block.(map[string]any); ok {
		if list, ok := m["sources"].([]any); ok && len(list) > 0 {
			sources = sources[:0]
			for _, s := range list {
				name, _ := s.(string)
				if name != "env" && name != "dotenv" {
					return nil, fmt.Errorf("Deployment manifest '%s' is invalid: manifest/secrets/sources: must be 'env' or 'dotenv'", manifest)
				}
				sources = append(sources, name)
			}
		}
		if p, ok := m["dotenv"].(string); ok && p != "" {
			dotenv, explicitDotenv = p, true
		}
	}
	if !filepath.IsAbs(dotenv) {
		dotenv = filepath.Join(filepath.Dir(manifest), dotenv)
	}
	var file map[string]string
	if slices.Contains(sources, "dotenv") {
		raw, err := os.ReadFile(dotenv)
		switch {
		case err == nil:
			file = parseDotenv(raw)
		case explicitDotenv || !os.IsNotExist(err):
			return nil, fmt.Errorf("Deployment manifest secrets: declared dotenv file '%s' cannot be read: %v", dotenv, err)
		}
	}
	return func(name string) (string, bool) {
		for _, s := range sources {
			if s == "env" {
				if v, ok := env(name); ok {
					return v, true
				}
			} else if v, ok := file[name]; ok {
				return v, true
			}
		}
		return "", false
	}, nil
}

// parseDotenv reads NAME=value lines (# comments, optional quotes), without
// touching the process environment.
func parseDotenv(raw []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
}

var secretRef = regexp.MustCompile(`\$\$|\$\{secret:([^}]*)\}`)
var secretName = regexp.MustCompile(`^[A-Z0-9_]+$`)

// resolveSecrets replaces ${secret:NAME} in every string of v ($$ is a
// literal $), and names every unresolved reference in one error.
func resolveSecrets(v any, site string, lookup func(string) (string, bool)) (any, error) {
	var missing []string
	var walk func(v any, site string) (any, error)
	walk = func(v any, site string) (any, error) {
		switch v := v.(type) {
		case string:
			var err error
			out := secretRef.ReplaceAllStringFunc(v, func(m string) string {
				if m == "$$" {
					return "$"
				}
				name := secretRef.FindStringSubmatch(m)[1]
				if !secretName.MatchString(name) {
					err = fmt.Errorf("%s: malformed secret reference '%s' — the form is ${secret:NAME} with NAME = [A-Z0-9_]+.", site, m)
					return m
				}
				val, ok := lookup(name)
				if !ok {
					missing = append(missing, site+" → "+m)
				}
				return val
			})
			return out, err
		case map[string]any:
			out := make(map[string]any, len(v))
			for _, k := range sortedKeys(v) {
				r, err := walk(v[k], site+"."+k)
				if err != nil {
					return nil, err
				}
				out[k] = r
			}
			return out, nil
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				r, err := walk(e, fmt.Sprintf("%s.%d", site, i))
				if err != nil {
					return nil, err
				}
				out[i] = r
			}
			return out, nil
		}
		return v, nil
	}
	if v == nil {
		return map[string]any{}, nil
	}
	out, err := walk(v, site)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("unresolved secret references: %s — set them in the environment or the manifest's dotenv file.", strings.Join(missing, "; "))
	}
	return out, nil
}
