package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/realm-go/realm/pkg/errcode"
)

// notify-svc refuses to start, saying why with ENGINE_CONFIG_INVALID,
// when its configuration names nothing it can act on.
func TestAStartWithoutWhatItNeedsIsRefusedWithItsCode(t *testing.T) {
	dir := t.TempDir()
	write := func(name, config string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("version: 1\nsecrets: { sources: [env] }\n"+config), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	slack := func(config string) string {
		return "notifiers:\n  slack_gate:\n    type: slack\n    config: {" + config + "}\n"
	}
	cases := []struct {
		name, manifest, redis, want string
	}{
		{"no manifest", "", "redis://127.0.0.1:1", "--manifest is required"},
		{"no slack_gate", write("none.yaml", ""), "redis://127.0.0.1:1", "has no notifiers.slack_gate"},
		{"a bot token without a channel", write("bot.yaml", slack("bot_token: xoxb-1")), "redis://127.0.0.1:1", "'bot_token' without 'channel_id'"},
		{"nothing to post with", write("empty.yaml", slack("")), "redis://127.0.0.1:1", "nothing to post with"},
		{"no Redis", write("ok.yaml", slack("bot_token: xoxb-1, channel_id: C1")), "", "needs the Redis engine-svc stores runs in"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("REALM_MANIFEST", "")
			for _, k := range []string{"REDIS_URL", "REDIS_CLUSTER_ADDRS", "REDIS_SENTINEL_ADDRS"} {
				t.Setenv(k, "")
			}
			args := []string{"--manifest", c.manifest}
			if c.redis != "" {
				args = append(args, "--redis-url", c.redis)
			}
			f, err := parseFlags(args, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			err = run(f)
			line := errorLine(err)
			if errcode.CodeOf(err) != errcode.EngineConfigInvalid || !strings.Contains(line, c.want) || !strings.HasSuffix(line, " [ENGINE_CONFIG_INVALID]") {
				t.Errorf("refusal %q (code %q)", line, errcode.CodeOf(err))
			}
		})
	}
}
