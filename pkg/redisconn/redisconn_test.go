package redisconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRegisterFallsBackToEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		EnvURL: " redis://a:1 ", EnvClusterAddrs: "c1,c2", EnvSentinelAddrs: "s1", EnvSentinelMaster: "m",
		EnvCA: "/ca.pem", EnvPassword: "pw", EnvTLS: "true", EnvTimeout: "2s", EnvUsername: "realm", EnvSentinelPassword: "spw",
	}
	var f Flags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f.Register(fs, func(k string) string { return env[k] }, "Redis of the test")
	got := [6]string{f.URL, f.ClusterAddrs, f.SentinelAddrs, f.SentinelMaster, f.CA, f.Password}
	if want := [6]string{"redis://a:1", "c1,c2", "s1", "m", "/ca.pem", "pw"}; got != want {
		t.Fatalf("from env: got %q, want %q", got, want)
	}
	if more := [4]string{f.TLS, f.Timeout, f.Username, f.SentinelPassword}; more != [4]string{"true", "2s", "realm", "spw"} {
		t.Fatalf("from env: got %q", more)
	}
	if err := fs.Parse([]string{"--redis-url", "redis://b:2", "--redis-cluster-addrs", ""}); err != nil {
		t.Fatal(err)
	}
	if f.URL != "redis://b:2" || f.ClusterAddrs != "" {
		t.Fatalf("flags do not override env: %+v", f)
	}
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, e := range []string{EnvURL, EnvClusterAddrs, EnvSentinelAddrs, EnvSentinelMaster, EnvCA, EnvPassword, EnvTLS, EnvTimeout, "Redis of the test", "-redis-url url"} {
		if !strings.Contains(help.String(), e) {
			t.Errorf("help does not name %s:\n%s", e, help.String())
		}
	}
	if strings.Contains(help.String(), "default") {
		t.Errorf("help shows the environment's values as defaults:\n%s", help.String())
	}
}

// A flag wins over the environment; from the environment alone REDIS_URL
// wins (make test sets REDIS_URL and REDIS_CLUSTER_ADDRS for every
// process); two flags are refused.
func TestTopologyPrecedence(t *testing.T) {
	t.Parallel()
	both := map[string]string{EnvURL: "redis://a:1", EnvClusterAddrs: "c:1", EnvSentinelAddrs: "s:1", EnvSentinelMaster: "m"}
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string
		wantErr string
	}{
		{name: "env only", env: both, want: "redis://a:1"},
		{name: "cluster env only", env: map[string]string{EnvClusterAddrs: "c:1"}, want: "cluster c:1"},
		{name: "cluster flag over url env", env: both, args: []string{"--redis-cluster-addrs", "c:2"}, want: "cluster c:2"},
		{name: "sentinel flag over env", env: both, args: []string{"--redis-sentinel-addrs", "s:2"}, want: "sentinel master m via s:2"},
		{name: "url flag over env", env: both, args: []string{"--redis-url", "redis://b:2"}, want: "redis://b:2"},
		{name: "two flags", args: []string{"--redis-url", "redis://b:2", "--redis-cluster-addrs", "c:2"}, wantErr: "only one of"},
		{name: "none", want: "none", wantErr: "no Redis given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var f Flags
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			f.Register(fs, func(k string) string { return tt.env[k] }, "Redis")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && f.String() != tt.want {
				t.Errorf("String() = %q, want %q", f.String(), tt.want)
			}
			c, err := f.NewClient()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
		})
	}
}

func TestClientPicksTopology(t *testing.T) {
	t.Parallel()
	ca := writeCA(t)
	tests := []struct {
		name    string
		f       Flags
		check   func(t *testing.T, c redis.UniversalClient)
		wantErr string
		desc    string
	}{
		{name: "none", f: Flags{}, wantErr: "no Redis given", desc: "none"},
		{name: "two topologies", f: Flags{URL: "redis://a:1", ClusterAddrs: "b:2"}, wantErr: "only one of"},
		{name: "sentinel without master", f: Flags{SentinelAddrs: "s:1"}, wantErr: "--redis-sentinel-master"},
		{name: "bad url", f: Flags{URL: "http://a:1"}, wantErr: "--redis-url"},
		{name: "ca without tls", f: Flags{URL: "redis://a:1", CA: ca}, wantErr: "rediss://"},
		{name: "missing ca", f: Flags{URL: "rediss://a:1", CA: filepath.Join(t.TempDir(), "none.pem")}, wantErr: "--redis-ca"},
		{
			name: "standalone, password from env", f: Flags{URL: "redis://u@a:1/2", Password: "pw"}, desc: "redis://u@a:1/2",
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Addr != "a:1" || o.DB != 2 || o.Username != "u" || o.Password != "pw" || o.TLSConfig != nil {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "url password wins, redacted", f: Flags{URL: "rediss://u:secret@a:1", Password: "pw", CA: ca}, desc: "rediss://u:xxxxx@a:1",
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Password != "secret" || o.TLSConfig == nil || o.TLSConfig.RootCAs == nil {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "cluster", f: Flags{ClusterAddrs: " c1:1, c2:2 ,", Password: "pw", CA: ca}, desc: "cluster c1:1,c2:2",
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.ClusterClient).Options()
				if strings.Join(o.Addrs, ",") != "c1:1,c2:2" || o.Password != "pw" || o.TLSConfig == nil {
					t.Errorf("options %+v", o)
				}
			},
		},
		{name: "tls flag with a redis:// url", f: Flags{URL: "redis://a:1", TLS: "true"}, wantErr: "rediss://"},
		{name: "tls flag not a bool", f: Flags{ClusterAddrs: "c1:1", TLS: "maybe"}, wantErr: "--redis-tls"},
		{name: "bad timeout", f: Flags{URL: "redis://a:1", Timeout: "soon"}, wantErr: "--redis-timeout"},
		{name: "negative timeout", f: Flags{URL: "redis://a:1", Timeout: "-1s"}, wantErr: "--redis-timeout"},
		{name: "sentinel password without sentinels", f: Flags{URL: "redis://a:1", SentinelPassword: "spw"}, wantErr: "REDIS_SENTINEL_PASSWORD"},
		{
			name: "cluster over tls with the system's CAs, user and timeout", f: Flags{ClusterAddrs: "c1:1", TLS: "true", Username: "realm", Timeout: "750ms"},
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.ClusterClient).Options()
				// RootCAs nil is crypto/tls's "the system's CAs".
				if o.TLSConfig == nil || o.TLSConfig.RootCAs != nil || o.Username != "realm" ||
					o.DialTimeout != 750*time.Millisecond || o.ReadTimeout != 750*time.Millisecond || o.WriteTimeout != 750*time.Millisecond {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "standalone keeps go-redis's timeouts unless told", f: Flags{URL: "redis://a:1", Username: "realm"},
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Username != "realm" || o.DialTimeout != 5*time.Second || o.ReadTimeout != 5*time.Second {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "sentinel", f: Flags{SentinelAddrs: "s1:1,s2:2", SentinelMaster: "mymaster", Password: "pw"}, desc: "sentinel master mymaster via s1:1,s2:2",
			check: func(t *testing.T, c redis.UniversalClient) {
				o := c.(*redis.Client).Options()
				if o.Addr != "FailoverClient" || o.Password != "pw" {
					t.Errorf("options %+v", o)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.desc != "" && tt.f.String() != tt.desc {
				t.Errorf("String() = %q, want %q", tt.f.String(), tt.desc)
			}
			c, err := tt.f.NewClient()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tt.check(t, c)
		})
	}
}

func TestOpenFailsWhenUnreachable(t *testing.T) {
	t.Parallel()
	f := Flags{URL: "redis://127.0.0.1:1"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.Open(ctx); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("err = %v, want unreachable", err)
	}
}

// writeCA writes a self-signed certificate as a PEM file.
func writeCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A master watched by a Sentinel of the test's own: Open finds the master
// through the Sentinel, and writes reach it; a Sentinel with a password of
// its own (requirepass) is reached with REDIS_SENTINEL_PASSWORD, and
// refuses Open without it.
func TestOpenThroughSentinel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, requirepass string
	}{{name: "open"}, {name: "with its own password", requirepass: "sentinel-secret"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			master := startServer(t, "redis-server")
			dir := t.TempDir()
			conf := filepath.Join(dir, "sentinel.conf")
			body := fmt.Sprintf("sentinel monitor realmtest 127.0.0.1 %d 1\nsentinel down-after-milliseconds realmtest 5000\n", master)
			if tc.requirepass != "" {
				body += "requirepass " + tc.requirepass + "\n"
			}
			if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			sentinel := startServerAuth(t, tc.requirepass, "redis-server", conf, "--sentinel")
			f := Flags{SentinelAddrs: fmt.Sprintf("127.0.0.1:%d", sentinel), SentinelMaster: "realmtest"}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if tc.requirepass != "" {
				if c, err := f.Open(ctx); err == nil {
					_ = c.Close()
					t.Fatal("Open without the Sentinel's password succeeded")
				}
				f.SentinelPassword = tc.requirepass
			}
			c, err := f.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			direct := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", master)})
			defer direct.Close()
			if v, err := direct.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("the master does not hold the write: %q, %v", v, err)
			}
		})
	}
}

// startServer runs redis-server (a config file first, if any, then args)
// on a free port until the test ends, and waits until it answers.
func startServer(t *testing.T, bin string, args ...string) int {
	t.Helper()
	return startServerAuth(t, "", bin, args...)
}

// startServerAuth is startServer for a server that wants password.
func startServerAuth(t *testing.T, password, bin string, args ...string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--dir", t.TempDir())
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s (part of the redis-server package, which make test installs): %v", bin, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: password})
	defer c.Close()
	for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
		if i > 100 {
			t.Fatalf("%s on %d did not answer", bin, port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return port
}
