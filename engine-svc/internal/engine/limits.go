package engine

import (
	"fmt"

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
)

// WithinSize refuses m (what names it) when its encoding is past limit.
func WithinSize(what string, m proto.Message, limit int) error {
	if n := proto.Size(m); n > limit {
		return errcode.Newf(errcode.ResourceTooLarge, "%s is %d bytes, over the limit of %d bytes; nothing was recorded.", what, n, limit)
	}
	return nil
}

// WithinLength refuses s (what names it) when it is longer than limit bytes.
func WithinLength(what, s string, limit int) error {
	if len(s) > limit {
		return errcode.New(errcode.ResourceTooLarge, fmt.Sprintf("%s is %d bytes, over the limit of %d bytes; nothing was recorded.", what, len(s), limit))
	}
	return nil
}
