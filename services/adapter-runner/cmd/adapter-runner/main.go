// Command adapter-runner serves the built-in service adapters of the spec's
// catalog (§13.2) to engine-svc, so that `uses_service` steps call an
// outside HTTP service without code: `http` (the generic HTTP/JSON adapter,
// every setting from the call's config), `filesystem` (files below
// -filesystem-root, off without it), and the adapters a deployment
// manifest's `adapters:` section builds from them (-manifest).
//
//	adapter-runner [-engine-addr host:port] [-listen host:port]
//	               [-manifest realm.yaml] [-filesystem-root dir]
//	               [-secret-env-prefix REALM_SECRET_]
//	               [-allow-host host[:port] ...]
//	               [-secret-host NAME=host[:port][,host...] ...]
//
// The http adapter reaches only public addresses unless -allow-host (or a
// manifest entry's config.allow_hosts) allows a host, and sends a
// workflow's auth.token_env credential only to the hosts -secret-host binds
// it to (docs/adapters.md).
//
// -help lists every flag. SIGINT or SIGTERM deregisters it and stops it
// gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
	"github.com/realm-go/realm/services/adapter-runner/ratelimit"
)

func main() {
	var s settings
	runner.Main(runner.Program{
		Name:  "adapter-runner",
		Flags: s.define,
		Setup: func(_ context.Context, f *runner.Flags) error {
			var err error
			f.Adapters, err = build(f, s)
			return err
		},
	})
}

// settings are the adapter runner's own flags.
type settings struct {
	fsRoot, envPrefix string
	allowHosts        []string
	secretHosts       map[string][]string
}

func (s *settings) define(fs *flag.FlagSet) {
	// No default root: a runner's working folder holds its own files
	// (a .env among them), not a workflow's.
	fs.StringVar(&s.fsRoot, "filesystem-root", "", "the folder the filesystem adapter reads below (empty: no filesystem adapter)")
	fs.StringVar(&s.envPrefix, "secret-env-prefix", adapters.DefaultEnvPrefix, "the prefix of environment variables a workflow's auth.token_env may name ('*': any)")
	fs.Func("allow-host", "a host (or host:port) the http adapter may reach although it is on loopback, link-local or a private network; repeat or separate with commas", func(v string) error {
		hosts, err := adapters.ParseHostList(v)
		s.allowHosts = append(s.allowHosts, hosts...)
		return err
	})
	fs.Func("secret-host", "NAME=host[:port][,host…]: the hosts the credential in environment variable NAME may be sent to when a workflow's auth.token_env names it; repeat for each variable", func(v string) error {
		name, list, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return fmt.Errorf("'%s' is not NAME=host[,host…]", v)
		}
		hosts, err := adapters.ParseHostList(list)
		if err != nil {
			return err
		}
		if s.secretHosts == nil {
			s.secretHosts = map[string][]string{}
		}
		s.secretHosts[name] = append(s.secretHosts[name], hosts...)
		return nil
	})
}

// build makes the catalog's adapters and the manifest's, which override a
// built-in one of the same name.
func build(f *runner.Flags, s settings) (map[string]runner.Adapter, error) {
	// One set of buckets for every adapter: the limit is per process.
	opts := adapters.Options{EnvPrefix: s.envPrefix, Limiters: ratelimit.New(nil), AllowHosts: s.allowHosts, SecretHosts: s.secretHosts}
	adps, err := adapters.Catalog(opts, s.fsRoot)
	if err != nil || f.Manifest == "" {
		return adps, err
	}
	more, err := adapters.LoadManifest(f.Manifest, opts, s.fsRoot)
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
