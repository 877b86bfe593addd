package drive

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

// atGate shows an open gate once, carries out its expiry when the engine
// says it is owed (advance_run at a gate whose time is up), and otherwise
// waits one poll interval. A person answers; the driver never does.
func (d *driver) atGate(ctx context.Context, st *realmv1.RunState, g *realmv1.PendingGate) error {
	if g.GetGateId() != d.gateShown {
		d.gateShown = g.GetGateId()
		gate := &realmv1.Gate{GateId: g.GetGateId(), StepName: g.GetStepName(), Preview: g.GetPreview(),
			Choices: g.GetChoices(), ExpiresAt: g.GetExpiresAt()}
		if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED, Step: g.GetStepName(),
			Gate: gate, RunPhase: st.GetRunPhase(), Lines: stdout(d.gateBlock(g)...)}); err != nil {
			return err
		}
	}
	if owes(st.GetNextActions()) {
		return d.advance(ctx)
	}
	return sleep(ctx, d.o.GatePoll)
}

// gateBlock is the terminal fallback of §14: the gate, its text, how to
// answer each choice, and the waiting line.
func (d *driver) gateBlock(g *realmv1.PendingGate) []string {
	out := []string{"", fmt.Sprintf("⏸  Gate: %s | ID: %s", g.GetStepName(), g.GetGateId()), ""}
	for _, l := range strings.Split(reply.GateText(g, d.steps[g.GetStepName()].display), "\n") {
		out = append(out, "   "+l)
	}
	out = append(out, "")
	for _, c := range g.GetChoices() {
		out = append(out, fmt.Sprintf("   %s: realm run respond %s --gate %s --choice %s", label(c), d.runID, g.GetGateId(), c))
	}
	return append(out, "   Waiting for approval...")
}

// label is the choice with its first letter upper-cased.
func label(c string) string {
	r, n := utf8.DecodeRuneInString(c)
	if r == utf8.RuneError {
		return c
	}
	return string(unicode.ToUpper(r)) + c[n:]
}
