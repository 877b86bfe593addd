package mcpserver

import (
	"sync"

	"github.com/realm-go/realm/pkg/jsonenc"
)

// replyBufs are the buffers replies are written into; a reply is copied out
// as the result's text, so a buffer is free again once the string is made.
var replyBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledReply keeps one huge reply from pinning its buffer in the pool.
const maxPooledReply = 64 << 10

// encodeReply is encoding/json's encoding of v with HTML escaping off and
// no trailing newline, byte for byte (package jsonenc), into a pooled
// buffer.
func encodeReply(v any) (string, error) {
	bp := replyBufs.Get().(*[]byte)
	b, err := jsonenc.Append((*bp)[:0], v)
	s := string(b)
	if cap(b) <= maxPooledReply {
		*bp = b
		replyBufs.Put(bp)
	}
	return s, err
}
