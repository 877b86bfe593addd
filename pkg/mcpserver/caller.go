package mcpserver

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

const maxNameLen = 200

// AmbientCaller names this server on every request: $REALM_OPERATOR
// (by_source ambient), else <os-user>@<host> (derived), through channel ch.
// A REALM_OPERATOR that cannot be recorded refuses the start, as the CLI
// refuses a command, rather than sending a name the engine would refuse on
// every call. getenv nil means os.Getenv.
func AmbientCaller(getenv func(string) string, ch realmv1.Channel) (*realmv1.Caller, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &realmv1.Caller{Channel: ch}
	if op := strings.TrimSpace(getenv(OperatorEnv)); op != "" {
		if why := nameProblem(op); why != "" {
			return nil, fmt.Errorf("%s: %s; nothing was done. Give a name of at most %d characters with no control characters, or unset it.", OperatorEnv, why, maxNameLen)
		}
		c.By, c.BySource = op, "ambient"
		return c, nil
	}
	if by := derivedName(getenv); by != "" {
		c.By, c.BySource = by, "derived"
	}
	return c, nil
}

func nameProblem(name string) string {
	if utf8.RuneCountInString(name) > maxNameLen {
		return "longer than 200 characters"
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return "contains a control character"
		}
	}
	return ""
}

// derivedName is <os-user>@<host>, or "" when neither is known or the
// result could not be recorded.
func derivedName(getenv func(string) string) string {
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
	if nameProblem(n) != "" {
		return ""
	}
	return n
}
