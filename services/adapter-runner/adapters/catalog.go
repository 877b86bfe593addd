// Package adapters holds the built-in service adapters of the spec's
// catalog (§13.2) that the adapter runner serves, each a runner.Adapter:
// `http` (the generic HTTP/JSON adapter) and `filesystem`, served as they
// are, and github, slack, airtable, gorgias, shopify, notion, parcelpanel
// and mock, built from a deployment manifest's entries (their credentials
// come at construction). The API adapters share one layer (api.go): the
// guarded client, the service's rate limit and 429 waits, and the error
// classification of §13.4.
//
// What a call's config holds (CallAdapterRequest.config, built by the
// engine, spec §13.1): {adapter, trust} from the workflow's service, the
// step's config merged on top, then `service` (the service's name in the
// workflow) and `rate_limit` (the service's block, when it has one) set by
// the engine last. `service` and `rate_limit` key the per-service token
// bucket and the 429 waits; the other keys are the adapter's settings.
package adapters

import (
	"fmt"
	"maps"
	"slices"

	"github.com/realm-go/realm/pkg/runner"
)

// Catalog names served by this runner.
const (
	NameHTTP       = "http"
	NameFilesystem = "filesystem"
)

// builder constructs the catalog adapter a manifest entry registers as
// name, from the entry's config (secrets resolved; empty without one).
type builder func(name string, config map[string]any, opts Options) (runner.Adapter, error)

// builders are the catalog adapters a manifest entry may `use:`, besides
// filesystem (built apart: it needs the runner's root). Each adapter's
// file holds its constructor; this table is the one place they meet.
var builders = map[string]builder{
	NameHTTP: func(name string, config map[string]any, opts Options) (runner.Adapter, error) {
		return NewHTTP(name, config, opts)
	},
	NameGorgias:     newGorgias,
	NameShopify:     newShopify,
	NameParcelPanel: newParcelPanel,
	NameAirtable:    newAirtable,
	NameNotion:      newNotion,
	NameMock:        newMock,
	NameGitHub:      newGitHub,
	NameSlack:       newSlack,
}

// Built are the catalog names this runner can build, sorted.
func Built() []string {
	return slices.Sorted(maps.Keys(builders))
}

// CatalogNames are the spec's ten catalog names (§13.2).
var CatalogNames = []string{"github", "slack", "http", "airtable", "gorgias", "shopify", "notion", "parcelpanel", "filesystem", "mock"}

// Catalog returns the built-in adapters under their catalog names: `http`
// (every setting from the call's config) and, when fsRoot is not empty,
// `filesystem` confined to fsRoot.
func Catalog(opts Options, fsRoot string) (map[string]runner.Adapter, error) {
	h, err := NewHTTP(NameHTTP, nil, opts)
	if err != nil {
		return nil, err
	}
	out := map[string]runner.Adapter{NameHTTP: h}
	if fsRoot != "" {
		fs, err := NewFilesystem(fsRoot)
		if err != nil {
			return nil, fmt.Errorf("filesystem adapter root '%s': %w", fsRoot, err)
		}
		out[NameFilesystem] = fs
	}
	return out, nil
}
