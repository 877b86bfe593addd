package reply

import (
	"encoding/json"
	"fmt"
	"strings"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/template"
)

// GateQuestion is what a person at a terminal is asked at an open gate
// (`realm workflow run`, `realm agent`): the gate's resolved message, else
// its preview — headline and message joined by a blank line, "(no output)"
// for {}, a text as it is, anything else as indented JSON.
func GateQuestion(g *realmv1.PendingGate) string { return GateText(g, "") }

// GateText is GateQuestion with the gate step's `display` template (agent
// driver §14.1): between the resolved message and the formatted preview,
// the template rendered against the preview (short `{{ field }}` paths
// only, no filters, missing → empty).
func GateText(g *realmv1.PendingGate, display string) string {
	if g.ResolvedMessage != nil {
		return g.GetResolvedMessage()
	}
	v := g.GetPreview().AsInterface()
	if display != "" {
		return Display(display, v)
	}
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

// Display renders a step's `display` template against its output
// (workflow-file §8.2): only short `{{ field }}` paths of the output, no
// roots and no filters; anything else prints nothing.
func Display(display string, output any) string {
	m, _ := output.(map[string]any)
	out, _, _ := template.Render(display, template.Scope{Output: m}, template.ModeDisplay)
	return out
}
