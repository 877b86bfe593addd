package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"
)

// The environment variables the TLS flags fall back to.
const (
	CertEnv     = "REALM_TLS_CERT"
	KeyEnv      = "REALM_TLS_KEY"
	CAEnv       = "REALM_TLS_CA"
	ClientCAEnv = "REALM_TLS_CLIENT_CA"
)

// Files names a service's PEM files: its certificate and key (used both to
// serve and to call), the CA its peers' certificates must chain to, and,
// for a server, the CA its callers' certificates must chain to (ClientCA;
// CA when empty).
type Files struct {
	Cert, Key, CA, ClientCA string
}

// FromEnv reads REALM_TLS_CERT, REALM_TLS_KEY, REALM_TLS_CA and
// REALM_TLS_CLIENT_CA. getenv nil means os.Getenv.
func FromEnv(getenv func(string) string) Files {
	if getenv == nil {
		getenv = os.Getenv
	}
	return Files{Cert: getenv(CertEnv), Key: getenv(KeyEnv), CA: getenv(CAEnv), ClientCA: getenv(ClientCAEnv)}
}

// RegisterFlags defines --tls-cert, --tls-key and --tls-ca on fs (and
// --tls-client-ca when server is true), each defaulting to its environment
// variable (getenv nil means os.Getenv), writing into f.
func (f *Files) RegisterFlags(fs *flag.FlagSet, server bool, getenv func(string) string) {
	env := FromEnv(getenv)
	fs.StringVar(&f.Cert, "tls-cert", env.Cert, "this service's certificate, PEM (env "+CertEnv+"); with --tls-key turns mutual TLS on")
	fs.StringVar(&f.Key, "tls-key", env.Key, "the certificate's private key, PEM (env "+KeyEnv+")")
	fs.StringVar(&f.CA, "tls-ca", env.CA, "the Realm CA the peers' certificates must chain to, PEM (env "+CAEnv+")")
	if server {
		fs.StringVar(&f.ClientCA, "tls-client-ca", env.ClientCA, "the CA callers' certificates must chain to, PEM (env "+ClientCAEnv+"; default --tls-ca)")
	}
}

// Configured reports whether any TLS file is named: then all that are
// needed must be (Check).
func (f Files) Configured() bool {
	return f.Cert != "" || f.Key != "" || f.CA != "" || f.ClientCA != ""
}

// clientCA is the CA a server verifies callers against.
func (f Files) clientCA() string {
	if f.ClientCA != "" {
		return f.ClientCA
	}
	return f.CA
}

// Check says which file is missing for a server (server true) or a client,
// and loads each once so a bad file stops the program at start, not at its
// first call.
func (f Files) Check(server bool) error {
	var missing []string
	if f.Cert == "" {
		missing = append(missing, "--tls-cert ("+CertEnv+")")
	}
	if f.Key == "" {
		missing = append(missing, "--tls-key ("+KeyEnv+")")
	}
	ca := f.CA
	if server {
		ca = f.clientCA()
	}
	if ca == "" {
		if server {
			missing = append(missing, "--tls-client-ca or --tls-ca ("+ClientCAEnv+" or "+CAEnv+")")
		} else {
			missing = append(missing, "--tls-ca ("+CAEnv+")")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("mutual TLS needs a certificate, its key and the Realm CA; missing: %s", joinAnd(missing))
	}
	if _, err := newKeyPair(f.Cert, f.Key).get(); err != nil {
		return err
	}
	if _, err := newPool(ca).get(); err != nil {
		return err
	}
	return nil
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " and " + s[len(s)-1]
}

// stamp is what says a file changed: its modification time and size.
type stamp struct {
	mod  time.Time
	size int64
}

func stampOf(paths ...string) (stamp, error) {
	var s stamp
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return stamp{}, err
		}
		if fi.ModTime().After(s.mod) {
			s.mod = fi.ModTime()
		}
		s.size = s.size*31 + fi.Size()
	}
	return s, nil
}

// keyPair is a certificate and key read from files, read again when
// either file changes (cert-manager and kubelet replace them on rotation).
// A read that fails after one succeeded keeps the last good pair: a
// rotation caught half-written must not cut every connection.
type keyPair struct {
	cert, key string
	mu        sync.Mutex
	at        stamp
	pair      *tls.Certificate
}

func newKeyPair(cert, key string) *keyPair { return &keyPair{cert: cert, key: key} }

func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, err := stampOf(k.cert, k.key)
	if err == nil && k.pair != nil && st == k.at {
		return k.pair, nil
	}
	if err == nil {
		var p tls.Certificate
		if p, err = tls.LoadX509KeyPair(k.cert, k.key); err == nil {
			k.pair, k.at = &p, st
			return k.pair, nil
		}
	}
	if k.pair != nil {
		return k.pair, nil
	}
	return nil, fmt.Errorf("tls certificate %s with key %s: %w", k.cert, k.key, err)
}

// pool is a CA bundle read from a file, read again when it changes.
type pool struct {
	path string
	mu   sync.Mutex
	at   stamp
	p    *x509.CertPool
}

func newPool(path string) *pool { return &pool{path: path} }

func (c *pool) get() (*x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := stampOf(c.path)
	if err == nil && c.p != nil && st == c.at {
		return c.p, nil
	}
	if err == nil {
		var pem []byte
		if pem, err = os.ReadFile(c.path); err == nil {
			p := x509.NewCertPool()
			if p.AppendCertsFromPEM(pem) {
				c.p, c.at = p, st
				return c.p, nil
			}
			err = errors.New("no PEM certificate in it")
		}
	}
	if c.p != nil {
		return c.p, nil
	}
	return nil, fmt.Errorf("tls CA %s: %w", c.path, err)
}
