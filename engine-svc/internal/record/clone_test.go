package record

import (
	"encoding/json"
	"testing"
)

// A clone shares its run's settled steps until it changes them; whatever
// the clone does, the run it came from (the cache's) reads as before.
func TestCloneLeavesTheOriginalAsItWas(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(c *Run)
	}{
		{"a step completes", func(c *Run) { c.MarkCompleted("b", Completed()) }},
		{"a step fails", func(c *Run) { c.MarkFailed("b", "boom", &Settled{Outcome: "failed"}) }},
		{"a settled step is reopened", func(c *Run) { c.Unsettle("a") }},
		{"a step is claimed and released", func(c *Run) {
			c.MarkInProgress("b", &Claim{})
			c.Release("b")
		}},
		{"a step completes after a reopen", func(c *Run) {
			c.Unsettle("a")
			c.MarkCompleted("a", &Settled{Outcome: "gate", Choice: "yes"})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			orig := &Run{ID: "r"}
			orig.Normalize()
			orig.MarkCompleted("a", Completed())
			before, _ := json.Marshal(orig)

			c := orig.Clone()
			tc.change(c)
			// A second clone of the same run, changed too, as two
			// transactions on one cached run are.
			c2 := orig.Clone()
			c2.MarkCompleted("z", Completed())

			if after, _ := json.Marshal(orig); string(after) != string(before) {
				t.Fatalf("the original changed:\nbefore %s\nafter  %s", before, after)
			}
			if _, ok := c.Settled["z"]; ok {
				t.Fatal("one clone sees another clone's settled step")
			}
			if _, ok := c2.Settled["a"]; !ok {
				t.Fatal("a clone lost the settled step it was cloned with")
			}
		})
	}
}
