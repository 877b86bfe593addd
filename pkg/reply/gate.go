package reply

import (
	"encoding/json"
	"fmt"
	"strings"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// GateQuestion is what a person at a terminal is asked at an open gate
// (`realm workflow run`, `realm agent`): the gate's resolved message, else
// its preview — headline and message joined by a blank line, "(no output)"
// for {}, a text as it is, anything else as indented JSON.
func GateQuestion(g *realmv1.PendingGate) string {
	if g.ResolvedMessage != nil {
		return g.GetResolvedMessage()
	}
	v := g.GetPreview().AsInterface()
	if m, ok := v.(map[string]any); ok {
		if len(m) == 0 {
			return "(no output)"
		}
		var parts []string
		for _, k := range []string{"headline", "message"} {
			if s, ok := m[k].(string); ok {
				parts = append(parts, s)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n\n")
		}
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
