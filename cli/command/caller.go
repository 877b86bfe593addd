package command

import (
	"errors"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/identity"
)

// operatorEnv names the variable that states who this program is (cli.md §1.5).
const operatorEnv = identity.OperatorEnv

// maxNameLen is the longest program name a record keeps.
const maxNameLen = identity.MaxNameLen

// caller names this program for claims and evidence through the `run`
// door. A bad REALM_OPERATOR refuses the command before anything is sent.
func (a *app) caller() (*realmv1.Caller, error) {
	c, err := identity.Ambient(a.env.Getenv, realmv1.Channel_CHANNEL_RUN)
	var oe *identity.OperatorError
	if errors.As(err, &oe) {
		return nil, refuse("%s", oe.Error())
	}
	return c, err
}

// nameProblem says why name cannot be recorded, or "" when it can.
func nameProblem(name string) string { return identity.NameProblem(name) }
