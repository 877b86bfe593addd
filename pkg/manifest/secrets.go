package manifest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/realm-go/realm/pkg/dotenv"
)

// Lookup finds a secret's value by name.
type Lookup func(name string) (string, bool)

// Secrets returns the lookup the manifest's secrets block describes: its
// sources in order of precedence (default [dotenv]); env asks env (usually
// os.LookupEnv), dotenv reads a NAME=value file (default .env next to the
// manifest; a missing default file holds nothing, a missing declared one is
// an error).
func (f *File) Secrets(env Lookup) (Lookup, error) {
	sources := []string{"dotenv"}
	file := ".env"
	explicitFile := false
	if m, ok := f.top["secrets"].(map[string]any); ok {
		if list, ok := m["sources"].([]any); ok && len(list) > 0 {
			sources = sources[:0]
			for _, s := range list {
				name, _ := s.(string)
				if name != "env" && name != "dotenv" {
					return nil, f.Invalid("manifest/secrets/sources: must be 'env' or 'dotenv'")
				}
				sources = append(sources, name)
			}
		}
		if p, ok := m["dotenv"].(string); ok && p != "" {
			file, explicitFile = p, true
		}
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(filepath.Dir(f.Path), file)
	}
	var values map[string]string
	if slices.Contains(sources, "dotenv") {
		raw, err := os.ReadFile(file)
		switch {
		case err == nil:
			values = dotenv.Parse(raw)
		case explicitFile || !os.IsNotExist(err):
			return nil, fmt.Errorf("Deployment manifest secrets: declared dotenv file '%s' cannot be read: %v", file, err)
		}
	}
	return func(name string) (string, bool) {
		for _, s := range sources {
			if s == "env" {
				if v, ok := env(name); ok {
					return v, true
				}
			} else if v, ok := values[name]; ok {
				return v, true
			}
		}
		return "", false
	}, nil
}

var secretRef = regexp.MustCompile(`\$\$|\$\{secret:([^}]*)\}`)
var secretName = regexp.MustCompile(`^[A-Z0-9_]+$`)

// ResolveSecrets returns a copy of a config value with ${secret:NAME}
// replaced in every string ($$ is a literal $). site is where v is
// ("adapters.ledger.config"); every unresolved reference is named in one
// error. A nil v is {}.
func ResolveSecrets(v any, site string, lookup Lookup) (any, error) {
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
			for _, k := range slices.Sorted(maps.Keys(v)) {
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

// FindSecretRef returns the first ${secret:…} reference in a config value
// and the site where it is, for a reader that does not resolve secrets and
// must refuse them rather than pass the text on.
func FindSecretRef(v any, site string) (where, ref string, found bool) {
	switch v := v.(type) {
	case string:
		if i := strings.Index(v, "${secret:"); i >= 0 && (i == 0 || v[i-1] != '$') {
			ref := v[i:]
			if j := strings.IndexByte(ref, '}'); j >= 0 {
				ref = ref[:j+1]
			}
			return site, ref, true
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if s, ref, ok := FindSecretRef(v[k], site+"."+k); ok {
				return s, ref, true
			}
		}
	case []any:
		for i, e := range v {
			if s, ref, ok := FindSecretRef(e, fmt.Sprintf("%s.%d", site, i)); ok {
				return s, ref, true
			}
		}
	}
	return "", "", false
}
