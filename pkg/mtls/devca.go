package mtls

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Spec is one certificate a development CA issues.
type Spec struct {
	// Name is the subject's common name and the files' base name
	// (<Name>.crt, <Name>.key).
	Name string
	Role Role
	// Grants are a runner's capabilities, "<kind>:<name>".
	Grants []string
	// Hosts are the DNS names and IPs it serves on (default: localhost,
	// 127.0.0.1 and ::1). Name is always one of its DNS names: engine-svc
	// verifies a runner by the name it registered with, wherever it runs.
	Hosts []string
}

// Development certificates' lifetimes: long enough to forget, short enough
// that a copied key does not outlive the laptop. A certificate within
// renewBefore of its end is issued again.
const (
	devCALife   = 10 * 365 * 24 * time.Hour
	devCertLife = 365 * 24 * time.Hour
	renewBefore = 30 * 24 * time.Hour
)

// DevCAName is the development CA's common name.
const DevCAName = "Realm development CA"

// EnsureDev makes dir hold a development CA (ca.crt, ca.key) and, for each
// spec, a certificate and key signed by it. What is there and still right
// (signed by this CA, same identity and hosts, not near its end) is kept;
// the rest is issued again. It returns the names issued. Keys are written
// 0600 in a 0700 folder, each file whole or not at all.
func EnsureDev(dir string, specs []Spec, now time.Time) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tls folder: %w", err)
	}
	ca, caKey, fresh, err := devCA(dir, now)
	if err != nil {
		return nil, err
	}
	var issued []string
	if fresh {
		issued = append(issued, "ca")
	}
	for _, s := range specs {
		if s.Name == "" || !s.Role.Known() || s.Name != filepath.Base(s.Name) || s.Name == "ca" {
			return issued, fmt.Errorf("certificate %q (role %q): want a file-safe name other than ca and one of the roles %s", s.Name, s.Role, roleList(Roles))
		}
		if !fresh && current(dir, s, ca, now) {
			continue
		}
		if err := issue(dir, s, ca, caKey, now); err != nil {
			return issued, err
		}
		issued = append(issued, s.Name)
	}
	return issued, nil
}

// DevFiles are the Files of the certificate name in a folder EnsureDev
// filled.
func DevFiles(dir, name string) Files {
	return Files{
		Cert: filepath.Join(dir, name+".crt"),
		Key:  filepath.Join(dir, name+".key"),
		CA:   filepath.Join(dir, "ca.crt"),
	}
}

func devCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, bool, error) {
	crt, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if c, k, err := readPair(crt, key); err == nil && c.IsCA && now.Add(renewBefore).Before(c.NotAfter) {
		return c, k, false, nil
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: DevCAName, Organization: []string{"Realm"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(devCALife),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, nil, false, err
	}
	c, _ := x509.ParseCertificate(der)
	if err := writePair(crt, key, der, k); err != nil {
		return nil, nil, false, err
	}
	return c, k, true, nil
}

// current reports whether dir's certificate for s is signed by ca, states
// s exactly and is not near its end.
func current(dir string, s Spec, ca *x509.Certificate, now time.Time) bool {
	f := DevFiles(dir, s.Name)
	c, _, err := readPair(f.Cert, f.Key)
	if err != nil || c.CheckSignatureFrom(ca) != nil || !now.Add(renewBefore).Before(c.NotAfter) {
		return false
	}
	id, err := IdentityOf(c)
	if err != nil || id.Name != s.Name || id.Role != s.Role || !slices.Equal(id.Grants, sortedCopy(s.Grants)) {
		return false
	}
	dns, ips := splitHosts(s.Name, s.Hosts)
	return slices.Equal(c.DNSNames, dns) && slices.EqualFunc(c.IPAddresses, ips, net.IP.Equal)
}

func issue(dir string, s Spec, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	dns, ips := splitHosts(s.Name, s.Hosts)
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.Name, OrganizationalUnit: []string{string(s.Role)}, Organization: []string{"Realm"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(devCertLife),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	for _, g := range sortedCopy(s.Grants) {
		u, err := url.Parse(grantScheme + ":" + g)
		if err != nil {
			return fmt.Errorf("certificate %s: grant %q: %w", s.Name, g, err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", s.Name, err)
	}
	f := DevFiles(dir, s.Name)
	return writePair(f.Cert, f.Key, der, k)
}

func splitHosts(name string, hosts []string) (dns []string, ips []net.IP) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	if !slices.Contains(hosts, name) {
		hosts = append([]string{name}, hosts...)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	return dns, ips
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func readPair(crtPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(crtPath)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		return nil, nil, errors.New("not PEM")
	}
	c, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.ParseECPrivateKey(kp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !k.PublicKey.Equal(c.PublicKey) {
		return nil, nil, errors.New("key does not match certificate")
	}
	return c, k, nil
}

// writePair writes the key first, then the certificate, each through a
// temporary file renamed into place: a reader (a service re-reading its
// files) sees the old pair or the new, and the key never world-readable.
func writePair(crtPath, keyPath string, der []byte, k *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	if err := writeFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return writeFile(crtPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := writeAll(tmp, data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeAll(f *os.File, data []byte) (int64, error) { return bytes.NewReader(data).WriteTo(f) }
