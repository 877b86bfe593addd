package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

func samePacked(t *testing.T, got, want *packed) {
	t.Helper()
	if !bytes.Equal(got.doc, want.doc) || !bytes.Equal(got.cids, want.cids) || !maps.EqualFunc(got.outputs, want.outputs, bytes.Equal) ||
		!slices.EqualFunc(got.evidence, want.evidence, bytes.Equal) {
		t.Fatalf("decoded %q %q %q, want %q %q %q", got.doc, got.outputs, got.evidence, want.doc, want.outputs, want.evidence)
	}
}

func TestPackedRoundTrips(t *testing.T) {
	tests := []struct {
		name string
		p    packed
	}{
		{"empty run", packed{doc: []byte{}, outputs: map[string][]byte{}, evidence: [][]byte{}}},
		{"document only", packed{doc: []byte(`{"id":"r"}`), outputs: map[string][]byte{}, evidence: [][]byte{}}},
		{"commit ids", packed{doc: []byte(`{}`), cids: []byte("0123456789abcdef0123456789abcdef"), outputs: map[string][]byte{}, evidence: [][]byte{}}},
		{"empty output value and binary entry", packed{doc: []byte(`{}`), outputs: map[string][]byte{"a": {}, "": []byte("x")},
			evidence: [][]byte{{0xff, 0, 0xfe}, []byte(`{"step_id":"a"}`)}}},
		{"large", packed{doc: bytes.Repeat([]byte(`{"k":"v"}`), 20000), outputs: map[string][]byte{"big": bytes.Repeat([]byte("z"), 1<<20)},
			evidence: slices.Repeat([][]byte{[]byte(`{"step_id":"s"}`)}, 3000)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encodePacked(&tc.p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodePacked(b, false)
			if err != nil {
				t.Fatal(err)
			}
			samePacked(t, got, &tc.p)
			doc, err := decodePacked(b, true)
			if err != nil || !bytes.Equal(doc.doc, tc.p.doc) {
				t.Fatalf("document only: %q, %v", doc.doc, err)
			}
			// Encoding is deterministic: outputs go by name.
			again, _ := encodePacked(got)
			if !bytes.Equal(again, b) {
				t.Fatal("a second encoding differs")
			}
		})
	}
}

func TestDamagedPackedRunIsAnError(t *testing.T) {
	good, err := encodePacked(&packed{doc: []byte(`{"id":"r"}`), outputs: map[string][]byte{"a": []byte("1")}, evidence: [][]byte{[]byte("e")}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    []byte
		// docIntact: the document before the damage still reads alone
		// (a listing reads no further).
		docIntact bool
	}{
		{"empty", []byte{}, false},
		{"other format", append([]byte{9}, good[1:]...), false},
		{"cut short", good[:len(good)-3], true},
		{"no stream", good[:2], false},
		{"huge doc length", []byte{packFormat, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodePacked(tc.b, false); !errors.Is(err, errPackedDamaged) {
				t.Fatalf("decode: %v, want errPackedDamaged", err)
			}
			if _, err := decodePacked(tc.b, true); (err == nil) != tc.docIntact {
				t.Fatalf("document alone: %v, want an error: %v", err, !tc.docIntact)
			}
		})
	}
}

// FuzzDecodePacked: no input panics or allocates without bound, and what
// decodes encodes back to something that decodes the same.
func FuzzDecodePacked(f *testing.F) {
	for _, p := range []*packed{
		{doc: []byte(`{"id":"r"}`), outputs: map[string][]byte{"a": []byte(`{"n":1}`)}, evidence: [][]byte{[]byte(`{"step_id":"a"}`)}},
		{doc: []byte{}, outputs: map[string][]byte{}, evidence: [][]byte{}},
	} {
		b, err := encodePacked(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePacked(b, false)
		if err != nil {
			return
		}
		again, err := encodePacked(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := decodePacked(again, false)
		if err != nil {
			t.Fatal(err)
		}
		samePacked(t, q, p)
	})
}

// tenStepRun is an ended ten-step run's parts as the engine stores them,
// each step with its own answer and evidence hash.
func tenStepRun() *packed {
	hex := func(i int) string { return fmt.Sprintf("%x", sha256.Sum256([]byte{byte(i)})) }
	p := &packed{outputs: map[string][]byte{}, cids: []byte(strings.Repeat("0123456789abcdef", 16))}
	var settled []string
	for s := 1; s <= 10; s++ {
		out := fmt.Sprintf(`{"n":%d,"note":"fine"}`, 4370+s)
		p.outputs[fmt.Sprintf("s%d", s)] = []byte(out)
		p.evidence = append(p.evidence, []byte(fmt.Sprintf(`{"step_id":"s%d","status":"success","started_at":"2026-12-04T03:47:%02d.%03dZ","completed_at":"2026-12-04T03:47:%02d.%03dZ","duration_ms":0,"input_summary":%s,"output_summary":%s,"evidence_hash":"%s","diagnostics":{"validation_rejections":0},"definition_version":1,"definition_hash":"%s"}`,
			s, 10+s, s*97%1000, 10+s, s*131%1000, out, out, hex(s), hex(99))))
		settled = append(settled, fmt.Sprintf(`"s%d":{"token":null,"outcome":"complete"}`, s))
	}
	p.doc = []byte(`{"id":"13fbab12-bfa7-4a24-aa16-136055ff3782","workflow_id":"bench","workflow_version":1,"params":{},"created_at":"2026-12-04T03:47:25.968Z","updated_at":"2026-12-04T03:47:25.971Z","version":10,"completed_steps":["s1","s2","s3","s4","s5","s6","s7","s8","s9","s10"],"in_progress_steps":[],"failed_steps":[],"skipped_steps":[],"settled":{` +
		strings.Join(settled, ",") + `},"run_phase":"completed","terminal_state":true,"terminal_reason":"Workflow completed.","sealed_by":{"arm":"complete"},"evidence_count":10,"last_step":"s10"}`)
	return p
}

// BenchmarkPacked is what packing an ended ten-step run costs the engine
// (encode: once per run, in the sweep) and what reading it costs after
// (decode for LoadRun and Evidence, doc for a listing's page entry).
func BenchmarkPacked(b *testing.B) {
	p := tenStepRun()
	raw := len(p.doc) + len(p.cids)
	for k, v := range p.outputs {
		raw += len(k) + len(v)
	}
	for _, e := range p.evidence {
		raw += len(e)
	}
	pk, err := encodePacked(p)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodePacked(p); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(raw), "raw-B")
		b.ReportMetric(float64(len(pk)), "packed-B")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodePacked(pk, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("doc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodePacked(pk, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
