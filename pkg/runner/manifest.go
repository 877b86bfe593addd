package runner

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/realm-go/realm/pkg/handler"
)

// LoadManifest reads the `handlers` section of a deployment manifest
// (realm.yaml, spec §15) and returns one Registration per entry, so a runner
// serves what its manifest names:
//
//	version: 1
//	handlers:
//	  order_total:
//	    use: makeTotal        # a key of registry
//	    config:
//	      unit_price: 12.5
//
// In Go, code cannot be loaded from a file at run time, so `use` names a
// handler the runner registered in code, in registry. A handler that
// implements handler.Configurable is built by calling Configure once with
// the entry's name and config (the counterpart of the contract's factory);
// any other handler is served as it is and may not be given a config.
//
// Checked: version 1, unknown keys (outside config), every entry's `use`.
// The other sections (adapters, processors, secrets, notifiers) are left to
// their readers; a ${secret:NAME} reference is refused, since this reader
// does not resolve secrets.
func LoadManifest(path string, registry map[string]handler.Handler) ([]Registration, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("Deployment manifest '%s' cannot be read: %w", path, err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("Deployment manifest '%s' is not valid YAML: %w", path, err)
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("Deployment manifest '%s' is invalid: "+format, append([]any{path}, args...)...)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, invalid("manifest: must be object")
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		switch k {
		case "version", "secrets", "adapters", "handlers", "processors", "notifiers":
		default:
			return nil, invalid("manifest: unknown key '%s'", k)
		}
	}
	version, ok := top["version"]
	if !ok {
		return nil, invalid("manifest: must have required property 'version'")
	}
	if v, isInt := version.(int); !isInt || v != 1 {
		return nil, invalid("manifest/version: must be equal to constant")
	}
	if top["handlers"] == nil {
		return nil, nil
	}
	entries, ok := top["handlers"].(map[string]any)
	if !ok {
		return nil, invalid("manifest/handlers: must be object")
	}

	var regs []Registration
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		entry, ok := entries[name].(map[string]any)
		if !ok {
			return nil, invalid("manifest/handlers/%s: must be object", name)
		}
		for _, k := range slices.Sorted(maps.Keys(entry)) {
			if k != "use" && k != "config" {
				return nil, invalid("manifest/handlers/%s: unknown key '%s'", name, k)
			}
		}
		use, _ := entry["use"].(string)
		if use == "" {
			return nil, fmt.Errorf("Deployment manifest '%s': handlers.%s needs 'use:' — the name of a handler registered in this runner's code.", path, name)
		}
		var config map[string]any
		switch c := entry["config"].(type) {
		case nil:
		case map[string]any:
			config = c
		default:
			return nil, invalid("manifest/handlers/%s/config: must be object", name)
		}
		if site, ref, found := findSecretRef(config, "handlers."+name+".config"); found {
			return nil, fmt.Errorf("Deployment manifest '%s': %s → %s: secret references are not resolved by this runner; put the value in the config or read it from the environment in code.", path, site, ref)
		}
		h, ok := registry[use]
		if !ok {
			return nil, fmt.Errorf("Deployment manifest '%s': handlers.%s — no handler '%s' is registered in this runner's code. Available: %s.",
				path, name, use, strings.Join(slices.Sorted(maps.Keys(registry)), ", "))
		}
		if c, ok := h.(handler.Configurable); ok {
			if config == nil {
				config = map[string]any{}
			}
			built, err := c.Configure(name, config)
			if err == nil && built == nil {
				err = fmt.Errorf("Configure returned no handler")
			}
			if err != nil {
				return nil, fmt.Errorf("Deployment manifest '%s': constructing handlers.%s (use: %s) failed: %w", path, name, use, err)
			}
			h = built
		} else if len(config) > 0 {
			return nil, fmt.Errorf("Deployment manifest '%s': handlers.%s — '%s' takes no config (it is not a handler.Configurable); remove the 'config:' block.", path, name, use)
		}
		regs = append(regs, Registration{Name: name, Handler: h, Manifest: path})
	}
	return regs, nil
}

// findSecretRef returns the first ${secret:…} reference in a config value
// and where it is.
func findSecretRef(v any, site string) (string, string, bool) {
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
			if s, ref, ok := findSecretRef(v[k], site+"."+k); ok {
				return s, ref, true
			}
		}
	case []any:
		for i, e := range v {
			if s, ref, ok := findSecretRef(e, fmt.Sprintf("%s.%d", site, i)); ok {
				return s, ref, true
			}
		}
	}
	return "", "", false
}
