package slackgate_test

import (
	"testing"
	"time"

	"github.com/realm-go/realm/notify-svc/slackgate"
)

// TestTheWordingsAreTheOriginals checks the texts the flow tests
// (package notifier) cannot reach with one workflow: the final reminder
// of a gate that will be enacted, the preview renderings and the quoting.
func TestTheWordingsAreTheOriginals(t *testing.T) {
	gate := func(preview any) slackgate.Gate {
		return slackgate.Gate{RunID: "r1", GateID: "g1", Step: "draft", Preview: preview, Choices: []string{"ok"}}
	}
	tail := "\n\n---\n*Reply in this thread with `ok` to resolve, or run:*\n```realm run respond r1 --gate g1 --choice ok```"
	cases := []struct{ name, got, want string }{
		{"final wording of a gate that will be enacted", slackgate.Final("approve", 3*time.Minute+10*time.Second, "settle_default"),
			"⏰ gate `approve` expired 3m ago — will enact settle_default; realm run drain --expired."},
		{"final wording of a finding-only gate", slackgate.Final("approve", 0, ""),
			"⏰ gate `approve` expired 0m ago — finding-only (no on_expiry declared, nothing will be enacted); still waiting for a response."},
		{"escalation without an owner", slackgate.Escalation("", "approve", 31*time.Minute), "gate `approve` has been open for 31 minutes. Please respond."},
		{"escalation to the owner", slackgate.Escalation("@ops", "approve", 30*time.Minute), "@ops — gate `approve` has been open for 30 minutes. Please respond."},
		{"resolution default", slackgate.Resolved("send", nil), "✅ Gate resolved: `send` — run continuing."},
		{"resolution message of the choice", slackgate.Resolved("send", map[string]string{"send": "Sent."}), "Sent."},
		{"ended run", slackgate.ResolvedEnded("hold", []string{"Guard step 'g' aborted the run.", "Reason: held."}),
			"Gate resolved: `hold`.\nGuard step 'g' aborted the run.\nReason: held."},
		{"headline and message of the preview", slackgate.Block(gate(map[string]any{"headline": "Refund", "message": "Refund $12?"}), false),
			"*Gate:* `draft`\n\n*Refund*\n\nRefund $12?" + tail},
		{"empty preview", slackgate.Block(gate(map[string]any{}), false), "*Gate:* `draft`\n\n_(no preview)_" + tail},
		{"other preview as pretty JSON in a fence", slackgate.Block(gate(map[string]any{"reply": "hi"}), false),
			"*Gate:* `draft`\n\n```\n{\n  \"reply\": \"hi\"\n}\n```" + tail},
		{"shell-safe choice as is", slackgate.ShellQuote("send_now"), "send_now"},
		{"other choices single-quoted", slackgate.ShellQuote("it's $5"), `'it'\''s $5'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got\n%q\nwant\n%q", c.got, c.want)
			}
		})
	}
}
