// Package identity says who is behind a console request: in dev mode a
// person on this machine who has not signed in, otherwise the name a
// trusted reverse proxy puts in a header after its own sign-in.
package identity

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Person is who a request comes from.
type Person struct {
	// Name is recorded as responded_by when the person answers a gate.
	Name string
	// Verified is true when someone other than the person vouches for the
	// name (the reverse proxy); dev mode's name is only this process's.
	Verified bool
}

// Refusal is a request the console will not serve, with the sentence that
// says why and the HTTP status.
type Refusal struct {
	Status int
	Msg    string
	// Login, when set, is where a page load is sent to sign in instead.
	Login string
}

func (r *Refusal) Error() string { return r.Msg }

// Source identifies requests.
type Source interface {
	// Identify returns the request's person, or a *Refusal.
	Identify(r *http.Request) (Person, error)
	// Mode is the sentence every page shows about sign-in.
	Mode() string
	// EnforcesOwner reports whether a gate's owner restricts who answers:
	// only when the name is vouched for.
	EnforcesOwner() bool
}

// Dev serves loopback callers only, with no sign-in: every request is Name.
type Dev struct{ Name string }

// Identify refuses a caller that is not on this machine: dev mode has no
// sign-in, so the network is its only fence.
func (d Dev) Identify(r *http.Request) (Person, error) {
	ip, err := remoteIP(r)
	if err != nil || !ip.IsLoopback() {
		return Person{}, &Refusal{Status: http.StatusForbidden, Msg: "This console is in dev mode (no sign-in) and serves this machine only; your request came from " + r.RemoteAddr + "."}
	}
	return Person{Name: d.Name}, nil
}

// Mode says dev mode on every page.
func (d Dev) Mode() string {
	return fmt.Sprintf("Dev mode: no sign-in, loopback only. Answers are recorded as %q, and a gate's owner is not enforced.", d.Name)
}

// EnforcesOwner is false: nobody vouches for the dev name.
func (Dev) EnforcesOwner() bool { return false }

// Proxy takes the person from Header, set by a reverse proxy that has signed
// them in, and believes it only from the Trusted networks: anyone else could
// write the header themselves.
type Proxy struct {
	Header  string
	Trusted []netip.Prefix
}

// ParseCIDRs reads a comma-separated list of networks (a bare address is
// its own /32 or /128).
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("--trusted-proxy %q is neither a network (10.0.0.0/8) nor an address", f)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxy %q is not a network such as 10.0.0.0/8", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Identify honours the header only from a trusted proxy.
func (p Proxy) Identify(r *http.Request) (Person, error) {
	ip, err := remoteIP(r)
	if err != nil || !p.trusts(ip) {
		return Person{}, &Refusal{Status: http.StatusForbidden, Msg: "This console signs people in through its reverse proxy, and this request did not come through it (from " + r.RemoteAddr + ")."}
	}
	name := strings.TrimSpace(r.Header.Get(p.Header))
	if name == "" {
		return Person{}, &Refusal{Status: http.StatusUnauthorized, Msg: "The reverse proxy sent no " + p.Header + " header, so nobody is signed in; sign in through the proxy and try again."}
	}
	if len(name) > 200 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Person{}, &Refusal{Status: http.StatusBadRequest, Msg: "The " + p.Header + " header is not a name (more than 200 characters, or control characters)."}
	}
	return Person{Name: name, Verified: true}, nil
}

// Mode names the header.
func (p Proxy) Mode() string {
	return "Signed in through the reverse proxy (" + p.Header + ")."
}

// EnforcesOwner is true: the proxy vouches for the name.
func (Proxy) EnforcesOwner() bool { return true }

func (p Proxy) trusts(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, n := range p.Trusted {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func remoteIP(r *http.Request) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, errors.New("no remote address")
	}
	return a.Unmap(), nil
}

// MayAnswer says whether p may answer a gate whose owner is owner: anyone
// when it has none; otherwise the owner by name, with or without the '@'
// a workflow file often writes (owner: '@finance-oncall').
func MayAnswer(p Person, owner string) bool {
	owner = strings.TrimSpace(owner)
	if owner == "" {
		return true
	}
	norm := func(s string) string { return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "@")) }
	return norm(p.Name) == norm(owner)
}
