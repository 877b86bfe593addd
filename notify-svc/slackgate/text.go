// Package slackgate holds what notify-svc posts to Slack about a gate: the
// gate message, reminders, the escalation and the resolution, in the
// original's words (agent-driver §14.3), and the two ways of posting them
// (a bot token, an incoming webhook).
package slackgate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Text is the message's plain text (what a notification shows); the
// layout is in its mrkdwn block.
const Text = "⏸ Workflow gate waiting for approval"

// Gate is what the gate message shows of an open gate.
type Gate struct {
	RunID, GateID, Step string
	Owner               string // "" when the gate names none
	// Message is the gate's resolved_message ("" when it has none).
	Message string
	// Preview is the gate's preview, shown when there is no Message.
	Preview any
	Choices []string
}

// Block is the mrkdwn block of the gate message. An incoming webhook
// cannot read replies, so its heading sends the reader to a terminal.
func Block(g Gate, webhook bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*Gate:* `%s`\n", g.Step)
	if g.Owner != "" {
		fmt.Fprintf(&b, "*Owner:* %s\n", g.Owner)
	}
	b.WriteString("\n" + gateText(g) + "\n\n---\n")
	if webhook {
		b.WriteString("*Gate requires a terminal response — open a terminal and run:*\n")
	} else {
		quoted := make([]string, len(g.Choices))
		for i, c := range g.Choices {
			quoted[i] = "`" + c + "`"
		}
		fmt.Fprintf(&b, "*Reply in this thread with %s to resolve, or run:*\n", strings.Join(quoted, " or "))
	}
	lines := make([]string, len(g.Choices))
	for i, c := range g.Choices {
		lines[i] = fmt.Sprintf("realm run respond %s --gate %s --choice %s", g.RunID, g.GateID, ShellQuote(c))
	}
	b.WriteString("```" + strings.Join(lines, "\n") + "```")
	return b.String()
}

// gateText is the resolved_message, else a Slack rendering of the preview.
func gateText(g Gate) string {
	if g.Message != "" {
		return g.Message
	}
	if m, ok := g.Preview.(map[string]any); ok {
		if len(m) == 0 {
			return "_(no preview)_"
		}
		headline, _ := m["headline"].(string)
		message, _ := m["message"].(string)
		var parts []string
		if headline != "" {
			parts = append(parts, "*"+headline+"*")
		}
		if message != "" {
			parts = append(parts, message)
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n\n")
		}
	}
	pretty, err := json.MarshalIndent(g.Preview, "", "  ")
	if err != nil {
		pretty = []byte(fmt.Sprint(g.Preview))
	}
	return "```\n" + string(pretty) + "\n```"
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// ShellQuote quotes s for a POSIX shell: as is when it needs nothing,
// else in single quotes.
func ShellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Reminder is the reminder posted while a gate waits.
func Reminder(step string) string {
	return fmt.Sprintf("⏰ Reminder: gate `%s` is still waiting for a response.", step)
}

// Final is the reminder whose occurrence lands at or after the gate's
// expiry: what expiry will do, or that a finding-only gate (no
// on_expiry) still waits.
func Final(step string, ago time.Duration, onExpiry string) string {
	n := int(ago / time.Minute)
	if onExpiry == "" {
		return fmt.Sprintf("⏰ gate `%s` expired %dm ago — finding-only (no on_expiry declared, nothing will be enacted); still waiting for a response.", step, n)
	}
	return fmt.Sprintf("⏰ gate `%s` expired %dm ago — will enact %s; realm run drain --expired.", step, n, onExpiry)
}

// Escalation is the one escalation, addressed to the owner when the gate
// names one.
func Escalation(owner, step string, open time.Duration) string {
	s := fmt.Sprintf("gate `%s` has been open for %d minutes. Please respond.", step, int(open/time.Minute))
	if owner != "" {
		s = owner + " — " + s
	}
	return s
}

// Resolved is the post in the thread after a choice was recorded: the
// gate's resolution_messages[choice], or the default.
func Resolved(choice string, messages map[string]string) string {
	if m := messages[choice]; m != "" {
		return m
	}
	return fmt.Sprintf("✅ Gate resolved: `%s` — run continuing.", choice)
}

// ResolvedEnded is the post when the answer made the run end: the choice,
// then the ending's lines.
func ResolvedEnded(choice string, ending []string) string {
	return strings.Join(append([]string{fmt.Sprintf("Gate resolved: `%s`.", choice)}, ending...), "\n")
}

// IsReminder reports whether text is one of step's reminders, in either
// wording (the final one's minutes depend on when it was posted).
func IsReminder(step, text string) bool {
	return text == Reminder(step) || strings.HasPrefix(text, fmt.Sprintf("⏰ gate `%s` expired ", step))
}

// IsEscalation reports whether text is step's escalation, whatever
// minutes it counted.
func IsEscalation(step, text string) bool {
	return strings.Contains(text, fmt.Sprintf("gate `%s` has been open for ", step)) && strings.HasSuffix(text, " minutes. Please respond.")
}
