package manifest

import (
	"maps"
	"slices"
	"time"
)

// Defaults of notifiers.slack_gate (agent-driver §14.3).
const (
	DefaultReminderInterval    = 600_000 * time.Millisecond
	DefaultEscalationThreshold = 1_800_000 * time.Millisecond
)

// SlackGate is the notifiers.slack_gate block (workflow-file §15.5), its
// secrets resolved.
type SlackGate struct {
	WebhookURL    string
	BotToken      string
	ChannelID     string
	AppToken      string // Socket Mode
	SigningSecret string // Events API
	EventsPort    int    // Events API listener; 0 when unset
	// ReminderInterval is the operator reminder (reminder_interval_ms),
	// EscalationThreshold the one escalation (escalation_threshold_ms).
	ReminderInterval    time.Duration
	EscalationThreshold time.Duration
}

// slackGateKeys are the keys slack_gate's config may hold, and the kind
// of value each takes.
var slackGateKeys = map[string]string{
	"webhook_url": "string", "bot_token": "string", "channel_id": "string", "app_token": "string",
	"signing_secret": "string", "events_port": "integer",
	"reminder_interval_ms": "integer", "escalation_threshold_ms": "integer",
}

// SlackGate returns the notifiers.slack_gate block, nil when the manifest
// has none. Its config's ${secret:NAME} references are resolved through
// lookup. The schema errors and the four rules between keys are the
// original's words (agent-driver §14.3).
func (f *File) SlackGate(lookup Lookup) (*SlackGate, error) {
	if f.top["notifiers"] == nil {
		return nil, nil
	}
	n, ok := f.top["notifiers"].(map[string]any)
	if !ok {
		return nil, f.Invalid("manifest/notifiers: must be object")
	}
	for _, k := range slices.Sorted(maps.Keys(n)) {
		if k != "slack_gate" {
			return nil, f.Invalid("manifest/notifiers: unknown key '%s'", k)
		}
	}
	if _, present := n["slack_gate"]; !present {
		return nil, nil
	}
	block, ok := n["slack_gate"].(map[string]any)
	if !ok {
		return nil, f.Invalid("manifest/notifiers/slack_gate: must be object")
	}
	for _, k := range slices.Sorted(maps.Keys(block)) {
		if k != "type" && k != "config" {
			return nil, f.Invalid("manifest/notifiers/slack_gate: unknown key '%s'", k)
		}
	}
	if _, present := block["type"]; !present {
		return nil, f.Invalid("manifest/notifiers/slack_gate: must have required property 'type'")
	}
	if block["type"] != "slack" {
		return nil, f.Invalid("manifest/notifiers/slack_gate/type: must be equal to constant")
	}
	config := map[string]any{}
	if raw, present := block["config"]; present && raw != nil {
		if config, ok = raw.(map[string]any); !ok {
			return nil, f.Invalid("manifest/notifiers/slack_gate/config: must be object")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(config)) {
		kind, known := slackGateKeys[k]
		if !known {
			return nil, f.Invalid("manifest/notifiers/slack_gate/config: unknown key '%s'", k)
		}
		site := "manifest/notifiers/slack_gate/config/" + k
		if kind == "string" {
			if _, ok := config[k].(string); !ok {
				return nil, f.Invalid("%s: must be string", site)
			}
			continue
		}
		v, ok := config[k].(int)
		if !ok {
			return nil, f.Invalid("%s: must be integer", site)
		}
		if v < 1 {
			return nil, f.Invalid("%s: must be >= 1", site)
		}
		if k == "events_port" && v > 65535 {
			return nil, f.Invalid("%s: must be <= 65535", site)
		}
	}
	has := func(k string) bool { _, ok := config[k]; return ok }
	switch {
	case has("app_token") && !has("bot_token"):
		return nil, f.Errorf("notifiers.slack_gate: 'app_token' (Socket Mode) requires 'bot_token' — Socket Mode replies are posted via the bot token.")
	case has("signing_secret") && !has("events_port"):
		return nil, f.Errorf("notifiers.slack_gate: 'signing_secret' (Events API) requires 'events_port' — the events listener needs a port to bind.")
	case has("events_port") && !has("signing_secret"):
		return nil, f.Errorf("notifiers.slack_gate: 'events_port' requires 'signing_secret' — an events listener without request verification is not allowed.")
	case has("app_token") && has("signing_secret"):
		return nil, f.Errorf("notifiers.slack_gate: 'app_token' and 'signing_secret' are mutually exclusive — Socket Mode and the Events API are alternative reply channels; configure one.")
	}
	resolved := any(config)
	if lookup != nil {
		var err error
		if resolved, err = ResolveSecrets(config, "notifiers.slack_gate.config", lookup); err != nil {
			return nil, err
		}
	}
	c := resolved.(map[string]any)
	str := func(k string) string { s, _ := c[k].(string); return s }
	ms := func(k string, def time.Duration) time.Duration {
		if v, ok := c[k].(int); ok {
			return time.Duration(v) * time.Millisecond
		}
		return def
	}
	port, _ := c["events_port"].(int)
	return &SlackGate{
		WebhookURL: str("webhook_url"), BotToken: str("bot_token"), ChannelID: str("channel_id"),
		AppToken: str("app_token"), SigningSecret: str("signing_secret"), EventsPort: port,
		ReminderInterval:    ms("reminder_interval_ms", DefaultReminderInterval),
		EscalationThreshold: ms("escalation_threshold_ms", DefaultEscalationThreshold),
	}, nil
}
