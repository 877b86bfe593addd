package drive

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/quote"
)

// capabilityWait bounds the start-of-drive look at the registry: the
// warnings are advice, never a reason to hold the drive up.
const capabilityWait = 5 * time.Second

// capabilityWarnings are the `⚠ <capability warning>` lines a new run's
// drive prints before its header (§4, §16): one per handler or adapter a
// step needs that no live runner offers now. Only a warning — a runner
// may register before the step is reached; if none has by then, the step
// is blocked (capabilityBlockedLine) and the run is not failed. Without a
// registry client, or when the registry cannot be read, there are none.
func (d *driver) capabilityWarnings(ctx context.Context) []string {
	if d.o.Registry == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, capabilityWait)
	defer cancel()
	resp, err := d.o.Registry.ListCapabilities(ctx, &realmv1.ListCapabilitiesRequest{})
	if err != nil {
		return nil
	}
	offered := map[[2]string]bool{{"handler", quote.HandlerName}: true}
	for _, r := range resp.GetRunners() {
		for _, h := range r.GetHandlers() {
			offered[[2]string{"handler", h.GetName()}] = true
		}
		for _, a := range r.GetAdapters() {
			offered[[2]string{"adapter", a}] = true
		}
	}
	var out []string
	for _, step := range slices.Sorted(maps.Keys(d.steps)) {
		needs := d.steps[step].needs
		if needs[0] == "" || offered[needs] {
			continue
		}
		out = append(out, capabilityWarningLine(step, needs[0], needs[1]))
	}
	return out
}

// capabilityWarningLine is one start-of-drive capability warning, in the
// words seed 003 ("A name that is not registered") shows. "This runner"
// is, in this port, every live runner the engine's registry knows.
func capabilityWarningLine(step, kind, name string) string {
	return fmt.Sprintf("⚠ Step '%s' needs %s '%s', which is not registered in this runner. If reached it will block recoverably (not fail) until a runner that provides this %s executes it — load the missing extension or run on a capable runner.",
		step, kind, name, kind)
}
