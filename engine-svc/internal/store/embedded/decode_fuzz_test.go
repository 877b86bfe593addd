package embedded

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzDecodePayload: a journal record's payload read from disk, whatever
// its bytes, is either refused with an error or decoded into commands
// that encode back to a record decoding to the same commands; it never
// panics or allocates past what the payload can hold.
func FuzzDecodePayload(f *testing.F) {
	f.Add(encodeRecord(nil, [][]string{{"SET", "k", "v"}})[recordHeader:])
	f.Fuzz(func(t *testing.T, p []byte) {
		cmds, err := decodePayload(p)
		if err != nil {
			return
		}
		again, err := decodePayload(encodeRecord(nil, cmds)[recordHeader:])
		if err != nil || !reflect.DeepEqual(again, cmds) {
			t.Fatalf("%q decoded to %q, which re-encodes to %q (%v)", p, cmds, again, err)
		}
	})
}

// FuzzDecodeSnapshot: a base snapshot read from disk is either refused
// with an error or checked into one that encodes back to a snapshot that
// decodes alike; it never panics.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decode(data)
		if err != nil {
			return
		}
		enc, err := encode(s)
		if err != nil {
			t.Fatalf("a decoded snapshot does not encode: %v", err)
		}
		again, err := decode(enc)
		if err != nil {
			t.Fatalf("a decoded snapshot re-encodes to one refused: %v\n%s", err, enc)
		}
		enc2, _ := encode(again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("the round trip changed the snapshot:\n%s\n%s", enc, enc2)
		}
	})
}
