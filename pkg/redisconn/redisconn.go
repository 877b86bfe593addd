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

// Flags says where Redis is. At most one of URL, ClusterAddrs and
// SentinelAddrs may be set.
type Flags struct {
	URL            string // redis:// or rediss:// of a standalone server
	ClusterAddrs   string // comma-separated seeds of a Redis Cluster
	SentinelAddrs  string // comma-separated Sentinels
	SentinelMaster string // the master's name the Sentinels watch
	CA             string // PEM file of the CA that signed the server's certificate
	Password       string // used when the URL carries none (REDIS_PASSWORD)
}

// Register defines the flags on fs, each defaulting to its environment
// variable read through getenv (os.Getenv when nil). urlUsage says what
// Redis is for in this binary, as the --redis-url help.
func (f *Flags) Register(fs *flag.FlagSet, getenv func(string) string, urlUsage string) {
	if getenv == nil {
		getenv = os.Getenv
	}
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	fs.StringVar(&f.URL, "redis-url", env(EnvURL), urlUsage+" (redis:// or rediss:// for TLS; user and password in the URL or REDIS_PASSWORD) (env REDIS_URL)")
	fs.StringVar(&f.ClusterAddrs, "redis-cluster-addrs", env(EnvClusterAddrs), "comma-separated seed addresses of a Redis Cluster, instead of --redis-url (env REDIS_CLUSTER_ADDRS)")
	fs.StringVar(&f.SentinelAddrs, "redis-sentinel-addrs", env(EnvSentinelAddrs), "comma-separated Sentinel addresses, with --redis-sentinel-master, instead of --redis-url (env REDIS_SENTINEL_ADDRS)")
	fs.StringVar(&f.SentinelMaster, "redis-sentinel-master", env(EnvSentinelMaster), "name of the master the Sentinels watch (env REDIS_SENTINEL_MASTER)")
	fs.StringVar(&f.CA, "redis-ca", env(EnvCA), "PEM file of the CA of Redis's TLS certificate; with a Cluster or Sentinel it turns TLS on (env REDIS_CA)")
	f.Password = env(EnvPassword)
}

// Configured reports whether any Redis was given.
func (f *Flags) Configured() bool {
	return strings.TrimSpace(f.URL) != "" || strings.TrimSpace(f.ClusterAddrs) != "" || strings.TrimSpace(f.SentinelAddrs) != ""
}

// String describes the Redis for logs, without the password.
func (f *Flags) String() string {
	switch {
	case strings.TrimSpace(f.ClusterAddrs) != "":
		return "cluster " + strings.Join(splitAddrs(f.ClusterAddrs), ",")
	case strings.TrimSpace(f.SentinelAddrs) != "":
		return "sentinel master " + f.SentinelMaster + " via " + strings.Join(splitAddrs(f.SentinelAddrs), ",")
	case strings.TrimSpace(f.URL) != "":
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
	url, cluster, sentinel := strings.TrimSpace(f.URL), splitAddrs(f.ClusterAddrs), splitAddrs(f.SentinelAddrs)
	n := 0
	for _, set := range []bool{url != "", len(cluster) > 0, len(sentinel) > 0} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		return nil, errors.New("no Redis given: set --redis-url, --redis-cluster-addrs or --redis-sentinel-addrs")
	case n > 1:
		return nil, errors.New("give only one of --redis-url, --redis-cluster-addrs and --redis-sentinel-addrs")
	case len(sentinel) > 0 && strings.TrimSpace(f.SentinelMaster) == "":
		return nil, errors.New("--redis-sentinel-addrs needs --redis-sentinel-master (the master's name the Sentinels watch)")
	}
	roots, err := f.rootCAs()
	if err != nil {
		return nil, err
	}
	if url != "" {
		opt, err := redis.ParseURL(url)
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
	if len(cluster) > 0 {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster, Password: f.Password, TLSConfig: tlsConf}), nil
	}
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: strings.TrimSpace(f.SentinelMaster), SentinelAddrs: sentinel, Password: f.Password, TLSConfig: tlsConf,
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
