package workflow

import (
	"strings"
	"testing"
)

// Every rule of a trigger block is checked at validate/register, by the
// parser listen-svc serves it with, in listen §4.1's exact words followed
// by the line of the field at fault (of its object when it is missing).
func TestTriggerBlocksAreCheckedWhereTheyAreWritten(t *testing.T) {
	t.Parallel()
	const steps = "steps:\n  a:\n    description: A\n    execution: auto\n"
	wf := func(trigger string) string {
		return "id: w\nname: W\nversion: 1\ntrigger:\n  type: webhook\n  path: /hooks/w\n" + trigger + steps
	}
	for _, c := range []struct{ name, trigger, want string }{
		{"an auth mode that does not exist", "  auth:\n    mode: bogus\n",
			"trigger/auth/mode must be equal to one of the allowed values (line 8)"},
		{"a secret mode without its secret", "  auth:\n    mode: shared_secret\n    header: X-Token\n",
			"trigger/auth: missing required property 'secret_from' (line 7)"},
		{"a rate limit of nothing", "  auth:\n    mode: none\n  rate_limit:\n    per_second: 0\n",
			"trigger/rate_limit/per_second must be > 0 (line 10)"},
		{"a filter condition with neither header nor path", "  auth:\n    mode: none\n  filter:\n    all:\n      - value: x\n",
			"trigger/filter/all/0: must have exactly one of 'header' or 'path' (line 11)"},
		{"a dedup block without its id", "  auth:\n    mode: none\n  dedup:\n    ttl_minutes: 5\n",
			"trigger/dedup: missing required property 'id_from' (line 9)"},
		{"a property the auth mode does not take", "  auth:\n    mode: none\n    header: X-Token\n",
			"trigger/auth: unknown property 'header' (line 9)"},
		{"a params_map entry that is not a path", "  auth:\n    mode: none\n  params_map:\n    repo: 3\n",
			"trigger/params_map/repo must be string (line 10)"},
		{"a dedup ttl past its bound", "  auth:\n    mode: none\n  dedup:\n    id_from: header.x-id\n    ttl_minutes: 99999\n",
			"trigger/dedup/ttl_minutes must be <= 10080 (line 11)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, r := setup(t, wf(c.trigger))
			if r.Valid || !strings.Contains(strings.Join(r.Errors, "\n"), c.want) {
				t.Fatalf("errors = %q, want %q", r.Errors, c.want)
			}
		})
	}
	if _, r := setup(t, wf("  auth:\n    mode: none\n")); !r.Valid {
		t.Fatalf("a sound trigger refused: %v", r.Errors)
	}
}
