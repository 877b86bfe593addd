package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"slices"

	"google.golang.org/grpc/credentials"
)

// ServerCredentials are gRPC server credentials from f: TLS 1.2 or later
// with f's certificate, verifying a caller's certificate against f's
// client CA when one is presented. A caller without one completes the
// handshake and is refused per call (Authorize), so it is told what was
// refused rather than seeing a broken connection.
func (f Files) ServerCredentials() (credentials.TransportCredentials, error) {
	if err := f.Check(true); err != nil {
		return nil, err
	}
	kp, cas := newKeyPair(f.Cert, f.Key), newPool(f.clientCA())
	return &reloading{build: func(string) (*tls.Config, error) {
		cert, p, err := load(kp, cas)
		if err != nil {
			return nil, err
		}
		return &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{*cert},
			ClientCAs:    p,
			ClientAuth:   tls.VerifyClientCertIfGiven,
		}, nil
	}}, nil
}

// ClientCredentials are gRPC client credentials from f: f's certificate is
// presented to the server, whose certificate must chain to f's CA, be
// valid for the address dialled, and, when serverRoles are given, state
// one of them (engine-svc's callers want RoleEngine: a runner's
// certificate cannot stand in for the engine).
func (f Files) ClientCredentials(serverRoles ...Role) (credentials.TransportCredentials, error) {
	if err := f.Check(false); err != nil {
		return nil, err
	}
	kp, cas := newKeyPair(f.Cert, f.Key), newPool(f.CA)
	return &reloading{build: func(serverName string) (*tls.Config, error) {
		// Loaded here, not lazily in the handshake, so a bad file is
		// this dial's error, said plainly.
		cert, p, err := load(kp, cas)
		if err != nil {
			return nil, err
		}
		return &tls.Config{
			MinVersion: tls.VersionTLS12,
			ServerName: serverName,
			RootCAs:    p,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return cert, nil
			},
			VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
				if len(serverRoles) == 0 {
					return nil
				}
				if len(chains) == 0 || len(chains[0]) == 0 {
					return fmt.Errorf("the server at %s presented no verified certificate", serverName)
				}
				id, err := IdentityOf(chains[0][0])
				if err != nil {
					return fmt.Errorf("the server at %s: %w", serverName, err)
				}
				if !slices.Contains(serverRoles, id.Role) {
					return fmt.Errorf("the server at %s presented the certificate of %s; this connection wants role %s", serverName, id, roleList(serverRoles))
				}
				return nil
			},
		}, nil
	}}, nil
}

// load is the current certificate and CA pool, as the files are now.
func load(kp *keyPair, cas *pool) (*tls.Certificate, *x509.CertPool, error) {
	cert, err := kp.get()
	if err != nil {
		return nil, nil, err
	}
	p, err := cas.get()
	if err != nil {
		return nil, nil, err
	}
	return cert, p, nil
}

// reloading builds a fresh tls.Config for each handshake, so certificate
// files replaced on disk take effect for the next connection.
type reloading struct {
	build func(serverName string) (*tls.Config, error)
}

func (r *reloading) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host := authority
	if h, _, err := net.SplitHostPort(authority); err == nil {
		host = h
	}
	cfg, err := r.build(host)
	if err != nil {
		return nil, nil, err
	}
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
}

func (r *reloading) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg, err := r.build("")
	if err != nil {
		return nil, nil, err
	}
	return credentials.NewTLS(cfg).ServerHandshake(raw)
}

func (r *reloading) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (r *reloading) Clone() credentials.TransportCredentials { return &reloading{build: r.build} }

// OverrideServerName is gRPC's deprecated hook; the name dialled is used.
func (r *reloading) OverrideServerName(string) error { return nil }
