// Command adapter-runner serves the built-in service adapters of the spec's
// catalog (§13.2) to engine-svc, so that `uses_service` steps call an
// outside HTTP service without code: `http` (the generic HTTP/JSON adapter,
// every setting from the call's config), `filesystem` (files below
// -filesystem-root), and the adapters a deployment manifest's `adapters:`
// section builds from them (-manifest).
//
//	adapter-runner [-engine-addr host:port] [-listen host:port]
//	               [-manifest realm.yaml] [-filesystem-root dir]
//	               [-secret-env-prefix REALM_SECRET_]
//
// -help lists every flag. SIGINT or SIGTERM deregisters it and stops it
// gracefully.
package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
	"github.com/realm-go/realm/services/adapter-runner/ratelimit"
)

func main() {
	var fsRoot, envPrefix string
	runner.Main(runner.Program{
		Name: "adapter-runner",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&fsRoot, "filesystem-root", ".", "the folder the filesystem adapter reads below (empty: no filesystem adapter)")
			fs.StringVar(&envPrefix, "secret-env-prefix", adapters.DefaultEnvPrefix, "the prefix of environment variables a workflow's auth.token_env may name ('*': any)")
		},
		Setup: func(_ context.Context, f *runner.Flags) error {
			var err error
			f.Adapters, err = build(f, fsRoot, envPrefix)
			return err
		},
	})
}

// build makes the catalog's adapters and the manifest's, which override a
// built-in one of the same name.
func build(f *runner.Flags, fsRoot, envPrefix string) (map[string]runner.Adapter, error) {
	// One set of buckets for every adapter: the limit is per process.
	opts := adapters.Options{EnvPrefix: envPrefix, Limiters: ratelimit.New(nil)}
	adps, err := adapters.Catalog(opts, fsRoot)
	if err != nil || f.Manifest == "" {
		return adps, err
	}
	more, err := adapters.LoadManifest(f.Manifest, opts, fsRoot)
	if err != nil {
		return nil, fmt.Errorf("Error loading extensions: %w", err)
	}
	for name, a := range more {
		if _, builtIn := adps[name]; builtIn {
			f.Logger.Info(fmt.Sprintf("[realm] manifest adapter '%s' overrides the built-in adapter '%s'.", name, name))
		}
		adps[name] = a
	}
	return adps, nil
}
