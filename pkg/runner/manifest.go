package runner

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/manifest"
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
// The manifest is read by package manifest (version 1, no unknown keys
// outside config); this checks every entry's `use`. The other sections
// (adapters, processors, secrets, notifiers) are left to their readers; a
// ${secret:NAME} reference is refused, since this reader does not resolve
// secrets.
func LoadManifest(path string, registry map[string]handler.Handler) ([]Registration, error) {
	f, err := manifest.Load(path)
	if err != nil {
		return nil, err
	}
	entries, err := f.Handlers()
	if err != nil {
		return nil, err
	}
	var regs []Registration
	for _, e := range entries {
		if e.Use == "" {
			return nil, f.Errorf("handlers.%s needs 'use:' — the name of a handler registered in this runner's code.", e.Name)
		}
		if site, ref, found := manifest.FindSecretRef(e.Config, "handlers."+e.Name+".config"); found {
			return nil, f.Errorf("%s → %s: secret references are not resolved by this runner; put the value in the config or read it from the environment in code.", site, ref)
		}
		h, ok := registry[e.Use]
		if !ok {
			return nil, f.Errorf("handlers.%s — no handler '%s' is registered in this runner's code. Available: %s.",
				e.Name, e.Use, strings.Join(slices.Sorted(maps.Keys(registry)), ", "))
		}
		if c, ok := h.(handler.Configurable); ok {
			config := e.Config
			if config == nil {
				config = map[string]any{}
			}
			built, err := c.Configure(e.Name, config)
			if err == nil && built == nil {
				err = errors.New("Configure returned no handler")
			}
			if err != nil {
				return nil, f.Errorf("constructing handlers.%s (use: %s) failed: %w", e.Name, e.Use, err)
			}
			h = built
		} else if len(e.Config) > 0 {
			return nil, f.Errorf("handlers.%s — '%s' takes no config (it is not a handler.Configurable); remove the 'config:' block.", e.Name, e.Use)
		}
		regs = append(regs, Registration{Name: e.Name, Handler: h, Manifest: path})
	}
	return regs, nil
}
