// Package identity names the program behind a request — the name recorded
// on claims, evidence and open questions (cli spec §1.5): $REALM_OPERATOR
// when it is set (by_source "ambient"), else <os-user>@<host> ("derived").
// Every front door (the CLI, the MCP server) names itself the same way.
package identity

import (
	"fmt"
	"os"
	"os/user"
	"strings"
	"unicode"
	"unicode/utf8"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// OperatorEnv names the variable that states who this program is.
const OperatorEnv = "REALM_OPERATOR"

// MaxNameLen is the longest name a record keeps.
const MaxNameLen = 200

// OperatorError is a REALM_OPERATOR value that cannot be recorded.
type OperatorError struct{ Why string }

func (e *OperatorError) Error() string {
	return fmt.Sprintf("%s: %s; nothing was done. Give a name of at most %d characters with no control characters, or unset it.", OperatorEnv, e.Why, MaxNameLen)
}

// Ambient names this program for requests through channel ch. getenv nil
// means os.Getenv. A REALM_OPERATOR that cannot be recorded is an
// *OperatorError: callers refuse rather than send a name every call would
// be refused for.
func Ambient(getenv func(string) string, ch realmv1.Channel) (*realmv1.Caller, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &realmv1.Caller{Channel: ch}
	if op := strings.TrimSpace(getenv(OperatorEnv)); op != "" {
		if why := NameProblem(op); why != "" {
			return nil, &OperatorError{Why: why}
		}
		c.By, c.BySource = op, "ambient"
		return c, nil
	}
	if by := Derived(getenv); by != "" {
		c.By, c.BySource = by, "derived"
	}
	return c, nil
}

// NameProblem says why a name cannot be recorded, or "" when it can.
func NameProblem(name string) string {
	if utf8.RuneCountInString(name) > MaxNameLen {
		return "longer than 200 characters"
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return "contains a control character"
		}
	}
	return ""
}

// Derived is <os-user>@<host>, or "" when neither is known or the result
// could not be recorded.
func Derived(getenv func(string) string) string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = getenv("USER")
	}
	host, _ := os.Hostname()
	n := name + "@" + host
	switch {
	case name == "" && host == "":
		return ""
	case host == "":
		n = name
	}
	if NameProblem(n) != "" {
		return ""
	}
	return n
}
