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
	EnvTLS            = "REDIS_TLS"
	EnvTimeout        = "REDIS_TIMEOUT"
	EnvUsername       = "REDIS_USERNAME"
	EnvPassword       = "REDIS_PASSWORD"
	// EnvSentinelPassword is the Sentinels' own password (their
	// requirepass), when they have one; REDIS_PASSWORD is the master's.
	EnvSentinelPassword = "REDIS_SENTINEL_PASSWORD"
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
	// TLS turns TLS on for a Cluster or Sentinel, trusting the system's
	// CAs unless CA is given ("true"/"1"; a URL says rediss:// instead).
	TLS string
	// Timeout bounds each dial, read and write (a Go duration; "" keeps
	// go-redis's 5s).
	Timeout          string
	Username         string // the ACL user when the URL carries none (REDIS_USERNAME)
	Password         string // used when the URL carries none (REDIS_PASSWORD)
	SentinelPassword string // the Sentinels' requirepass (REDIS_SENTINEL_PASSWORD)

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
	isBool  bool // given alone (--redis-tls), it means "true"
}

// IsBoolFlag lets a boolean flag stand alone (flag and pflag both ask).
func (v envValue) IsBoolFlag() bool { return v.isBool }

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
		fs.Var(envValue{p: p, name: name, fromEnv: f.fromEnv, isBool: name == "redis-tls"}, name, usage)
		if *p = strings.TrimSpace(getenv(envName)); *p != "" {
			f.fromEnv[name] = true
		}
	}
	def(&f.URL, "redis-url", EnvURL, urlUsage+" (a `url`: redis://, or rediss:// for TLS; user and password in the URL, or REDIS_USERNAME and REDIS_PASSWORD for every topology) (env REDIS_URL)")
	def(&f.ClusterAddrs, "redis-cluster-addrs", EnvClusterAddrs, "comma-separated seed `addresses` of a Redis Cluster, instead of --redis-url (env REDIS_CLUSTER_ADDRS)")
	def(&f.SentinelAddrs, "redis-sentinel-addrs", EnvSentinelAddrs, "comma-separated Sentinel `addresses`, with --redis-sentinel-master, instead of --redis-url; the Sentinels' own password, if any, in REDIS_SENTINEL_PASSWORD (env REDIS_SENTINEL_ADDRS)")
	def(&f.SentinelMaster, "redis-sentinel-master", EnvSentinelMaster, "`name` of the master the Sentinels watch (env REDIS_SENTINEL_MASTER)")
	def(&f.CA, "redis-ca", EnvCA, "PEM `file` of the CA of Redis's TLS certificate; with a Cluster or Sentinel it turns TLS on (env REDIS_CA)")
	def(&f.TLS, "redis-tls", EnvTLS, "TLS to a Cluster or Sentinel, trusting the system's CAs (or --redis-ca's); a standalone server says rediss:// in its URL (env REDIS_TLS)")
	def(&f.Timeout, "redis-timeout", EnvTimeout, "`duration` each dial, read and write to Redis may take (go-redis's 5s when unset) (env REDIS_TIMEOUT)")
	f.Username = strings.TrimSpace(getenv(EnvUsername))
	f.Password = strings.TrimSpace(getenv(EnvPassword))
	f.SentinelPassword = strings.TrimSpace(getenv(EnvSentinelPassword))
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
	useTLS, err := parseBool("--redis-tls", f.TLS)
	if err != nil {
		return nil, err
	}
	timeout, err := f.timeout()
	if err != nil {
		return nil, err
	}
	if f.SentinelPassword != "" && kind != "sentinel" {
		return nil, errors.New(EnvSentinelPassword + " is set, but no Sentinel is given (--redis-sentinel-addrs): unset it, or give the Sentinels")
	}
	if kind == "url" {
		opt, err := redis.ParseURL(strings.TrimSpace(f.URL))
		if err != nil {
			return nil, fmt.Errorf("--redis-url: %w", err)
		}
		if opt.Username == "" {
			opt.Username = f.Username
		}
		if opt.Password == "" {
			opt.Password = f.Password
		}
		if useTLS && opt.TLSConfig == nil {
			return nil, errors.New("--redis-tls with a redis:// URL: say rediss:// in the URL for TLS to a standalone server")
		}
		if roots != nil {
			if opt.TLSConfig == nil {
				return nil, errors.New("--redis-ca needs a rediss:// URL (TLS)")
			}
			opt.TLSConfig.RootCAs = roots
		}
		setTimeouts(&opt.DialTimeout, &opt.ReadTimeout, &opt.WriteTimeout, timeout)
		return redis.NewClient(opt), nil
	}
	var tlsConf *tls.Config
	if roots != nil || useTLS {
		// RootCAs nil: the system's CAs.
		tlsConf = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	if kind == "cluster" {
		o := &redis.ClusterOptions{Addrs: splitAddrs(f.ClusterAddrs), Username: f.Username, Password: f.Password, TLSConfig: tlsConf}
		setTimeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, timeout)
		return redis.NewClusterClient(o), nil
	}
	o := &redis.FailoverOptions{
		MasterName: strings.TrimSpace(f.SentinelMaster), SentinelAddrs: splitAddrs(f.SentinelAddrs),
		Username: f.Username, Password: f.Password, SentinelPassword: f.SentinelPassword, TLSConfig: tlsConf,
	}
	setTimeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, timeout)
	return redis.NewFailoverClient(o), nil
}

// timeout is --redis-timeout, 0 when unset.
func (f *Flags) timeout() (time.Duration, error) {
	s := strings.TrimSpace(f.Timeout)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--redis-timeout %q: want a positive Go duration such as 2s or 500ms", s)
	}
	return d, nil
}

func setTimeouts(dial, read, write *time.Duration, d time.Duration) {
	if d > 0 {
		*dial, *read, *write = d, d, d
	}
}

// parseBool reads a true/false flag given as text ("" is false).
func parseBool(name, s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "0", "false", "no":
		return false, nil
	case "1", "true", "yes":
		return true, nil
	}
	return false, fmt.Errorf("%s %q: want true or false", name, s)
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
