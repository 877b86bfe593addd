package mcpserver

import (
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/identity"
)

// OperatorEnv names the variable that states who this program is.
const OperatorEnv = identity.OperatorEnv

// AmbientCaller names this server on every request (package identity):
// $REALM_OPERATOR, else <os-user>@<host>, through channel ch. A
// REALM_OPERATOR that cannot be recorded refuses the start.
func AmbientCaller(getenv func(string) string, ch realmv1.Channel) (*realmv1.Caller, error) {
	return identity.Ambient(getenv, ch)
}
