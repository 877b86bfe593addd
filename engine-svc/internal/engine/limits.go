package engine

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/realm-go/realm/pkg/errcode"
)

// Size limits (docs/security.md). A value past its limit is refused with
// RESOURCE_TOO_LARGE and nothing is recorded: every value of a run travels
// again in later calls (a handler gets the outputs before it), and gRPC
// messages stop at 4 MiB.
const (
	// MaxValueBytes bounds run params, an agent step's answer and a
	// handler's output, each.
	MaxValueBytes = 1 << 20
	// MaxLabelBytes bounds a gate's choice and the name of who answered.
	MaxLabelBytes = 4 << 10
	// MaxRunOutputBytes bounds a run's recorded outputs together: each
	// handler call carries them, and must stay under gRPC's 4 MiB.
	MaxRunOutputBytes = 3 << 20
)

// outputsFit reports the size the run's recorded outputs would have with
// v as step's output, and whether that is within MaxRunOutputBytes.
func (t *txn) outputsFit(step string, v any) (int, bool) {
	total := 0
	if t.base != nil {
		for k, raw := range t.base.Outputs {
			if slices.Contains(t.newOutputs, k) || k == step || internalField(k) {
				continue
			}
			total += len(raw)
		}
	}
	for _, k := range t.newOutputs {
		if k == step {
			continue
		}
		b, _ := t.encodeJSON(t.outputs[k]) // kept: the commit encodes it again from the cache
		total += len(b)
	}
	b, _ := t.encodeJSON(v)
	total += len(b)
	return total, total <= MaxRunOutputBytes
}

// runOutputsTooLarge is the refusal of an output that does not fit.
func runOutputsTooLarge(step string, total int) *errcode.Error {
	return errcode.Newf(errcode.ResourceTooLarge, "With the output of '%s' the run's outputs would be %d bytes, over the limit of %d bytes; it was not recorded.", step, total, MaxRunOutputBytes)
}

// WithinSize refuses m (what names it) when its encoding is past limit.
func WithinSize(what string, m proto.Message, limit int) error {
	if n := proto.Size(m); n > limit {
		return errcode.Newf(errcode.ResourceTooLarge, "%s is %d bytes, over the limit of %d bytes; nothing was recorded.", what, n, limit)
	}
	return nil
}

// WithinLength refuses s (what names it) when it is longer than limit bytes.
func WithinLength[T ~string | ~[]byte](what string, s T, limit int) error {
	if len(s) > limit {
		return errcode.New(errcode.ResourceTooLarge, fmt.Sprintf("%s is %d bytes, over the limit of %d bytes; nothing was recorded.", what, len(s), limit))
	}
	return nil
}
