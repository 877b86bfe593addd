// Package redisconn opens Redis the same way in every Realm binary: a
// standalone server (--redis-url, redis:// or rediss://), a Redis Cluster
// (--redis-cluster-addrs) or a Sentinel-watched master
// (--redis-sentinel-addrs + --redis-sentinel-master), each flag falling back
// to its environment variable.
package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The environment variables the flags fall back to. The password has no
// flag: a flag's value is visible to every user of the machine (ps).
const (
	EnvURL            = "REDIS_URL"
	EnvClusterAddrs   = "REDIS_CLUSTER_ADDRS"
	EnvSentinelAddrs  = "REDIS_SENTINEL_ADDRS"
	EnvSentinelMaster = "REDIS_SENTINEL_MASTER"
	EnvCA             = "REDIS_CA"
	EnvPassword       = "REDIS_PASSWORD"
)

// pingTimeout bounds Open's check that the server answers.
const pingTimeout = 5 * time.Second

// Flags says where Redis is. A topology given as a flag wins over the
// environment; from the environment alone REDIS_URL wins over
// REDIS_CLUSTER_ADDRS over REDIS_SENTINEL_ADDRS (make test sets both of the
// first two). Two given as flags (or set in the struct) are refused.
type Flags struct {
	URL            string // redis:// or rediss:// of a standalone server
	ClusterAddrs   string // comma-separated seeds of a Redis Cluster
	SentinelAddrs  string // comma-separated Sentinels
	SentinelMaster string // the master's name the Sentinels watch
	CA             string // PEM file of the CA that signed the server's certificate
	Password       string // used when the URL carries none (REDIS_PASSWORD)

	// fromEnv names the flags whose value came from the environment, not
	// the command line. Keyed by name, so a copy of Flags shares it.
	fromEnv map[string]bool
}

// envValue is a string flag that remembers whether the command line set
// it; it is a pflag.Value too (Type), so cobra commands can adopt it.
type envValue struct {
	p       *string
	name    string
	fromEnv map[string]bool
}

func (v envValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v envValue) Set(s string) error {
	*v.p = s
	delete(v.fromEnv, v.name)
	return nil
}

func (v envValue) Type() string { return "string" }

// Register defines the flags on fs, each defaulting to its environment
// variable read through getenv (os.Getenv when nil). urlUsage says what
// Redis is for in this binary, as the --redis-url help. A cobra command
// adopts them with pflag's AddGoFlagSet.
func (f *Flags) Register(fs *flag.FlagSet, getenv func(string) string, urlUsage string) {
	if getenv == nil {
		getenv = os.Getenv
	}
	f.fromEnv = map[string]bool{}
	def := func(p *string, name, envName, usage string) {
		// Defined before the environment is read: help and docs/cli.md
		// show no default, whatever the environment holds.
		*p = ""
		fs.Var(envValue{p: p, name: name, fromEnv: f.fromEnv}, name, usage)
		if *p = strings.TrimSpace(getenv(envName)); *p != "" {
			f.fromEnv[name] = true
		}
	}
	def(&f.URL, "redis-url", EnvURL, urlUsage+" (a `url`: redis://, or rediss:// for TLS; user and password in the URL or REDIS_PASSWORD) (env REDIS_URL)")
	def(&f.ClusterAddrs, "redis-cluster-addrs", EnvClusterAddrs, "comma-separated seed `addresses` of a Redis Cluster, instead of --redis-url (env REDIS_CLUSTER_ADDRS)")
	def(&f.SentinelAddrs, "redis-sentinel-addrs", EnvSentinelAddrs, "comma-separated Sentinel `addresses`, with --redis-sentinel-master, instead of --redis-url (env REDIS_SENTINEL_ADDRS)")
	def(&f.SentinelMaster, "redis-sentinel-master", EnvSentinelMaster, "`name` of the master the Sentinels watch (env REDIS_SENTINEL_MASTER)")
	def(&f.CA, "redis-ca", EnvCA, "PEM `file` of the CA of Redis's TLS certificate; with a Cluster or Sentinel it turns TLS on (env REDIS_CA)")
	f.Password = strings.TrimSpace(getenv(EnvPassword))
}

// topology is the one Redis the flags choose: "url", "cluster",
// "sentinel", or "" for none; err when two are given on an equal footing.
func (f *Flags) topology() (string, error) {
	given := []struct{ kind, flag, value string }{
		{"url", "redis-url", f.URL}, {"cluster", "redis-cluster-addrs", f.ClusterAddrs}, {"sentinel", "redis-sentinel-addrs", f.SentinelAddrs},
	}
	var explicit, env []string
	for _, g := range given {
		switch {
		case strings.TrimSpace(g.value) == "":
		case f.fromEnv[g.flag]:
			env = append(env, g.kind)
		default:
			explicit = append(explicit, g.kind)
		}
	}
	switch {
	case len(explicit) > 1:
		return "", errors.New("give only one of --redis-url, --redis-cluster-addrs and --redis-sentinel-addrs")
	case len(explicit) == 1:
		return explicit[0], nil
	case len(env) > 0:
		return env[0], nil
	}
	return "", nil
}

// Configured reports whether any Redis was given.
func (f *Flags) Configured() bool {
	return strings.TrimSpace(f.URL) != "" || strings.TrimSpace(f.ClusterAddrs) != "" || strings.TrimSpace(f.SentinelAddrs) != ""
}

// String describes the Redis chosen, for logs, without the password.
func (f *Flags) String() string {
	kind, err := f.topology()
	switch {
	case err != nil:
		return "ambiguous"
	case kind == "cluster":
		return "cluster " + strings.Join(splitAddrs(f.ClusterAddrs), ",")
	case kind == "sentinel":
		return "sentinel master " + f.SentinelMaster + " via " + strings.Join(splitAddrs(f.SentinelAddrs), ",")
	case kind == "url":
		u, err := url.Parse(strings.TrimSpace(f.URL))
		if err != nil {
			return "an unparsable URL"
		}
		return u.Redacted()
	}
	return "none"
}

// Open connects to the Redis the flags name and checks that it answers.
// The caller closes the client.
func (f *Flags) Open(ctx context.Context) (redis.UniversalClient, error) {
	c, err := f.NewClient()
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis %s unreachable: %w", f, err)
	}
	return c, nil
}

// NewClient builds the client of the one topology given without
// connecting, for a caller that checks reachability its own way (Open
// pings). The caller closes the client.
func (f *Flags) NewClient() (redis.UniversalClient, error) {
	kind, err := f.topology()
	switch {
	case err != nil:
		return nil, err
	case kind == "":
		return nil, errors.New("no Redis given: set --redis-url, --redis-cluster-addrs or --redis-sentinel-addrs")
	case kind == "sentinel" && strings.TrimSpace(f.SentinelMaster) == "":
		return nil, errors.New("--redis-sentinel-addrs needs --redis-sentinel-master (the master's name the Sentinels watch)")
	}
	roots, err := f.rootCAs()
	if err != nil {
		return nil, err
	}
	if kind == "url" {
		opt, err := redis.ParseURL(strings.TrimSpace(f.URL))
		if err != nil {
			return nil, fmt.Errorf("--redis-url: %w", err)
		}
		if opt.Password == "" {
			opt.Password = f.Password
		}
		if roots != nil {
			if opt.TLSConfig == nil {
				return nil, errors.New("--redis-ca needs a rediss:// URL (TLS)")
			}
			opt.TLSConfig.RootCAs = roots
		}
		return redis.NewClient(opt), nil
	}
	var tlsConf *tls.Config
	if roots != nil {
		tlsConf = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	if kind == "cluster" {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: splitAddrs(f.ClusterAddrs), Password: f.Password, TLSConfig: tlsConf}), nil
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: strings.TrimSpace(f.SentinelMaster), SentinelAddrs: splitAddrs(f.SentinelAddrs), Password: f.Password, TLSConfig: tlsConf,
	}), nil
}

func (f *Flags) rootCAs() (*x509.CertPool, error) {
	if strings.TrimSpace(f.CA) == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("--redis-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--redis-ca %s: no PEM certificate in it", f.CA)
	}
	return pool, nil
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
