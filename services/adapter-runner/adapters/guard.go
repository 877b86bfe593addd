package adapters

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// hostList is a list of allowed hosts: "name" (any port) or "name:port",
// an IPv6 literal in brackets when it has a port ("[::1]:8080").
type hostList []string

// readHostList reads allow_hosts-style entries, refusing ones that are not
// a bare host or host:port (a URL or a path is a mistake worth naming).
func readHostList(where string, v any) (hostList, error) {
	raw, ok := v.([]any)
	if !ok {
		return nil, invalid("%s must be a list of hosts such as 'ledger.internal' or '10.0.0.5:8443'", where)
	}
	out := make(hostList, 0, len(raw))
	for i, e := range raw {
		s, ok := e.(string)
		if !ok || !validHostEntry(s) {
			return nil, invalid("%s[%d] must be a host or host:port, such as 'ledger.internal' or '10.0.0.5:8443' (got %v)", where, i, e)
		}
		out = append(out, strings.ToLower(s))
	}
	return out, nil
}

// ParseHostList reads a comma-separated list of hosts (the runner's flags).
func ParseHostList(s string) ([]string, error) {
	var out []string
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimSpace(e)
		if !validHostEntry(e) {
			return nil, fmt.Errorf("'%s' is not a host or host:port", e)
		}
		out = append(out, strings.ToLower(e))
	}
	return out, nil
}

func validHostEntry(s string) bool {
	if s == "" || strings.ContainsAny(s, "/?#@ ") {
		return false
	}
	if h, p, err := net.SplitHostPort(s); err == nil {
		return h != "" && p != ""
	}
	return !strings.Contains(strings.Trim(s, "[]"), ":") || net.ParseIP(strings.Trim(s, "[]")) != nil
}

// has reports whether hostport ("name:port", as a transport dials it) is
// on the list: the entry names the host and, when it has one, the port.
func (l hostList) has(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	host = strings.ToLower(host)
	for _, e := range l {
		if h, p, err := net.SplitHostPort(e); err == nil {
			if strings.EqualFold(h, host) && p == port {
				return true
			}
		} else if strings.EqualFold(strings.Trim(e, "[]"), host) {
			return true
		}
	}
	return false
}

// hostPort is u's host with its port, the scheme's default when it names
// none: what a transport dials.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// refusedAddress is the dialler's refusal: the address a host resolved to
// is one a workflow must not reach unless the deployment allows the host.
type refusedAddress struct {
	host   string // as the request named it
	addr   netip.Addr
	reason string
}

func (e *refusedAddress) Error() string {
	if e.host == e.addr.String() {
		return fmt.Sprintf("%s is a %s address", e.addr, e.reason)
	}
	return fmt.Sprintf("%s resolves to %s, a %s address", e.host, e.addr, e.reason)
}

var (
	// shared is 100.64.0.0/10 (carrier-grade NAT), where some clouds keep
	// their metadata service.
	shared = netip.MustParsePrefix("100.64.0.0/10")
	// nat64 is the well-known NAT64 prefix: its last 32 bits are an IPv4
	// address the gateway reaches on the dialler's behalf.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// refusedKind names why addr may not be reached without an allowance, or
// "" when it may: loopback, link-local (the cloud metadata service at
// 169.254.169.254 among them), private, shared, unspecified and multicast
// addresses are inside the deployment, not services on the internet.
func refusedKind(addr netip.Addr) string {
	addr = addr.Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case addr.IsLoopback():
		return "loopback"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return "link-local (cloud metadata)"
	case addr.IsPrivate():
		return "private-network"
	case shared.Contains(addr):
		return "shared (carrier-grade NAT)"
	case addr.IsUnspecified():
		return "unspecified"
	case addr.IsMulticast(), addr.IsInterfaceLocalMulticast():
		return "multicast"
	}
	return ""
}

// guardedTransport is a transport whose every connection is checked where
// it is made: the address actually dialled, after DNS, for the first
// request and for each redirect alike, so neither a name that resolves
// inside the network (DNS rebinding) nor a redirect gets around the check.
// It uses no proxy: through one, the check would see only the proxy.
func guardedTransport(allowed hostList) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, hostport string) (net.Conn, error) {
		if allowed.has(hostport) {
			return plain.DialContext(ctx, network, hostport)
		}
		host, _, _ := net.SplitHostPort(hostport)
		d := *plain
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dialling %s: unexpected address %q", host, address)
			}
			if kind := refusedKind(ap.Addr()); kind != "" {
				return &refusedAddress{host: host, addr: ap.Addr().Unmap(), reason: kind}
			}
			return nil
		}
		return d.DialContext(ctx, network, hostport)
	}
	return t
}

// checkRedirect follows redirects on the same scheme and host only (a
// credential never leaves for another host), at most 5; a redirect to an
// address literal that is refused is named as such before that rule.
func (l hostList) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if addr, err := netip.ParseAddr(req.URL.Hostname()); err == nil && !l.has(hostPort(req.URL)) {
		if kind := refusedKind(addr); kind != "" {
			return &refusedAddress{host: req.URL.Hostname(), addr: addr.Unmap(), reason: kind}
		}
	}
	if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
		return fmt.Errorf("%w (%s)", errCrossHostRedirect, req.URL.Host)
	}
	return nil
}
