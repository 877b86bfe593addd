package client

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/pkg/mtls"
)

// Transport is the dial option for f: mutual TLS with f's certificate when
// f names any file (the server's certificate must then state one of
// serverRoles, when given), plaintext when it names none. A TLS file that
// cannot be read is the error, before anything is dialled.
func Transport(f mtls.Files, serverRoles ...mtls.Role) (grpc.DialOption, error) {
	if !f.Configured() {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	creds, err := f.ClientCredentials(serverRoles...)
	if err != nil {
		return nil, err
	}
	return grpc.WithTransportCredentials(creds), nil
}
