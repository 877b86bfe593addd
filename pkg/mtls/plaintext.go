package mtls

import (
	"fmt"
	"net"
)

// Loopback reports whether addr (host:port) listens only on this machine:
// a loopback IP or "localhost". An empty host (all interfaces) is not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// PlaintextWarning is what a service without TLS says at start.
func PlaintextWarning(service, addr string) string {
	return fmt.Sprintf("%s serves without TLS on %s (loopback only): any program on this machine may make every call, as the operator. Give --tls-cert, --tls-key and --tls-ca to require certificates (docs/security.md).", service, addr)
}

// CheckPlaintext refuses to serve without TLS anywhere but loopback, as
// Redis' protected mode does: off this machine, every caller would act
// as the operator.
func CheckPlaintext(service, addr string) error {
	if Loopback(addr) {
		return nil
	}
	return fmt.Errorf("%s: refusing to serve without TLS on %s: off loopback anyone who can connect could call every method as the operator. Give --tls-cert, --tls-key and --tls-ca (or REALM_TLS_CERT, REALM_TLS_KEY, REALM_TLS_CA; `make run` makes them for you), or listen on a loopback address (docs/security.md)", service, addr)
}
