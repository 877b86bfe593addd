package cli

import (
	"os"
	"os/user"
	"strings"
	"unicode"
	"unicode/utf8"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// operatorEnv names the variable that states who this program is (cli.md §1.5).
const operatorEnv = "REALM_OPERATOR"

// maxNameLen is the longest program name a record keeps.
const maxNameLen = 200

// caller names this program for claims and evidence: $REALM_OPERATOR
// (ambient), else <os-user>@<host> (derived), through the `run` door. A bad
// REALM_OPERATOR refuses the command before anything is sent.
func (a *app) caller() (*realmv1.Caller, error) {
	c := &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_RUN}
	if op := strings.TrimSpace(a.env.Getenv(operatorEnv)); op != "" {
		if why := nameProblem(op); why != "" {
			return nil, refuse("%s: %s; nothing was done. Give a name of at most %d characters with no control characters, or unset it.", operatorEnv, why, maxNameLen)
		}
		c.By, c.BySource = op, "ambient"
		return c, nil
	}
	if by := derivedName(a.env.Getenv); by != "" {
		c.By, c.BySource = by, "derived"
	}
	return c, nil
}

// nameProblem says why name cannot be recorded, or "" when it can.
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

// derivedName is <os-user>@<host>, or "" when neither can be found.
func derivedName(getenv func(string) string) string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = getenv("USER")
	}
	host, _ := os.Hostname()
	switch {
	case name == "" && host == "":
		return ""
	case host == "":
		return name
	case name == "":
		return "@" + host
	}
	n := name + "@" + host
	if nameProblem(n) != "" {
		return ""
	}
	return n
}
