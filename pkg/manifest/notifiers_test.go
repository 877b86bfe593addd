package manifest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/manifest"
)

// TestSlackGateIsRefusedInTheOriginalsWords checks each validation message
// of agent-driver §14.3 word for word, and what is accepted.
func TestSlackGateIsRefusedInTheOriginalsWords(t *testing.T) {
	const (
		rule    = "Deployment manifest 'realm.yaml': "
		invalid = "Deployment manifest 'realm.yaml' is invalid: "
	)
	cases := []struct {
		name, notifiers, err string
	}{
		{"app_token without bot_token", "slack_gate: {type: slack, config: {app_token: xapp-1, channel_id: C1}}",
			rule + "notifiers.slack_gate: 'app_token' (Socket Mode) requires 'bot_token' — Socket Mode replies are posted via the bot token."},
		{"signing_secret without events_port", "slack_gate: {type: slack, config: {bot_token: x, signing_secret: s}}",
			rule + "notifiers.slack_gate: 'signing_secret' (Events API) requires 'events_port' — the events listener needs a port to bind."},
		{"events_port without signing_secret", "slack_gate: {type: slack, config: {bot_token: x, events_port: 3000}}",
			rule + "notifiers.slack_gate: 'events_port' requires 'signing_secret' — an events listener without request verification is not allowed."},
		{"both reply channels", "slack_gate: {type: slack, config: {bot_token: x, app_token: y, signing_secret: s, events_port: 3000}}",
			rule + "notifiers.slack_gate: 'app_token' and 'signing_secret' are mutually exclusive — Socket Mode and the Events API are alternative reply channels; configure one."},
		{"unknown config key", "slack_gate: {type: slack, config: {channel: C1}}", invalid + "manifest/notifiers/slack_gate/config: unknown key 'channel'"},
		{"wrong type", "slack_gate: {type: teams, config: {}}", invalid + "manifest/notifiers/slack_gate/type: must be equal to constant"},
		{"another notifier", "email_gate: {type: email}", invalid + "manifest/notifiers: unknown key 'email_gate'"},
		{"events_port as a string", "slack_gate: {type: slack, config: {bot_token: x, signing_secret: s, events_port: '3000'}}",
			invalid + "manifest/notifiers/slack_gate/config/events_port: must be integer"},
		{"events_port out of range", "slack_gate: {type: slack, config: {bot_token: x, signing_secret: s, events_port: 70000}}",
			invalid + "manifest/notifiers/slack_gate/config/events_port: must be <= 65535"},
		{"a zero interval", "slack_gate: {type: slack, config: {reminder_interval_ms: 0}}",
			invalid + "manifest/notifiers/slack_gate/config/reminder_interval_ms: must be >= 1"},
		{"bot_token without channel_id is accepted", "slack_gate: {type: slack, config: {bot_token: x}}", ""},
		{"an empty config is accepted", "slack_gate: {type: slack, config: {}}", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := manifest.Parse("realm.yaml", []byte("version: 1\nnotifiers:\n  "+c.notifiers+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.SlackGate(nil)
			if got := errString(err); got != c.err {
				t.Errorf("error = %q\n want %q", got, c.err)
			}
		})
	}
}

func TestSlackGateResolvesSecretsAndDefaults(t *testing.T) {
	f, err := manifest.Parse("realm.yaml", []byte(strings.Join([]string{
		"version: 1",
		"notifiers:",
		"  slack_gate:",
		"    type: slack",
		"    config:",
		"      bot_token: '${secret:SLACK_BOT_TOKEN}'",
		"      channel_id: C0123",
		"      escalation_threshold_ms: 5000",
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(name string) (string, bool) {
		return map[string]string{"SLACK_BOT_TOKEN": "xoxb-1"}[name], name == "SLACK_BOT_TOKEN"
	}
	g, err := f.SlackGate(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if g.BotToken != "xoxb-1" || g.ChannelID != "C0123" || g.ReminderInterval != 10*time.Minute || g.EscalationThreshold != 5*time.Second {
		t.Errorf("slack_gate = %+v", g)
	}
	none, err := manifest.Parse("realm.yaml", []byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g, err := none.SlackGate(lookup); g != nil || err != nil {
		t.Errorf("no notifiers: %v %v", g, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
