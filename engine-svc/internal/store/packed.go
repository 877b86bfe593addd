package store

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// An ended run is read far less than it was written, and its evidence
// list and outputs hash hold most of its bytes: a ten-step run takes about
// 7.5 KB of Redis as three keys, and under 2 KB packed. PackRun folds a
// run's document, commit ids, outputs and evidence into one compressed
// field of its run hash and deletes the other two keys:
//
//	realm:{b<n>}:run:<id>   hash: v, pk (the packed run), g
//
// Packing changes no version: the run is the same run, read the same way
// (LoadRun, LoadDocs and Evidence decode a packed run), and a commit to a
// packed run unpacks it first (the commit script answers {3}; CommitRun
// unpacks the run and sends the commit again, whose answer is then the
// one it would have had). Field g counts packs and unpacks, so a read that
// straddled one is seen to have torn.
const (
	packField = "pk"
	genField  = "g"
)

// packFormat is a packed run's first byte: what follows it is the
// document's length (uvarint), then one raw DEFLATE stream of the
// document, the commit ids (length-prefixed), the outputs (count, then
// name and value, each length-prefixed, by name) and the evidence (count,
// then each entry length-prefixed). The
// document's length comes first so a listing inflates only the document.
const packFormat = 1

// maxPackedPart bounds a length read from a packed run: Redis refuses
// values above 512 MB, so a larger one is damage, not data.
const maxPackedPart = 512 << 20

// packed is a run's stored parts.
type packed struct {
	doc      []byte
	cids     []byte // the commit script's "cids"
	outputs  map[string][]byte
	evidence [][]byte
}

// packDict is the DEFLATE preset dictionary of format 1: a run
// document's and an evidence entry's shape, with none of a run's values.
// A packed run is too short for its first copy of each field name to pay
// for itself; with these as earlier text it costs a back-reference. It is
// part of the format: a change to it needs a new packFormat, and the old
// dictionary kept to read what was written with it.
var packDict = []byte(`{"id":"00000000-0000-0000-0000-000000000000","workflow_id":"","workflow_version":1,"params":{},` +
	`"created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z","version":1,"completed_steps":[],` +
	`"in_progress_steps":[],"failed_steps":[],"skipped_steps":[],"settled":{"":{"token":null,"outcome":"complete"}},` +
	`"run_phase":"completed","terminal_state":true,"terminal_reason":"Workflow completed.","sealed_by":{"arm":"complete"},` +
	`"evidence_count":1,"last_step":""}` +
	`{"step_id":"","status":"success","started_at":"2026-01-01T00:00:00.000Z","completed_at":"2026-01-01T00:00:00.000Z",` +
	`"duration_ms":0,"input_summary":{},"output_summary":{},"evidence_hash":"` + strings.Repeat("0", 64) +
	`","diagnostics":{"validation_rejections":0},"definition_version":1,"definition_hash":"` + strings.Repeat("0", 64) + `"}`)

// flateWriters are reused: a flate.Writer is several hundred kilobytes of
// state, far more than the run it compresses. The default level: BestSpeed
// ignores the dictionary, and its runs come out 40% larger.
var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriterDict(nil, flate.DefaultCompression, packDict) // only a bad level fails
	return w
}}

var flateReaders = sync.Pool{New: func() any { return flate.NewReaderDict(bytes.NewReader(nil), packDict) }}

// encodePacked is the pk field of a run with these parts.
func encodePacked(p *packed) ([]byte, error) {
	size := len(p.doc) + len(p.cids)
	for k, v := range p.outputs {
		size += len(k) + len(v)
	}
	for _, e := range p.evidence {
		size += len(e)
	}
	// The uncompressed body, then its compression after the header.
	body := make([]byte, 0, size-len(p.doc)+8*(len(p.outputs)+len(p.evidence)+3))
	body = appendPart(body, p.cids)
	body = binary.AppendUvarint(body, uint64(len(p.outputs)))
	for _, k := range slices.Sorted(mapKeys(p.outputs)) {
		body = appendPart(body, []byte(k))
		body = appendPart(body, p.outputs[k])
	}
	body = binary.AppendUvarint(body, uint64(len(p.evidence)))
	for _, e := range p.evidence {
		body = appendPart(body, e)
	}
	out := bytes.NewBuffer(make([]byte, 0, size/4+64))
	out.WriteByte(packFormat)
	out.Write(binary.AppendUvarint(nil, uint64(len(p.doc))))
	w := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(w)
	w.Reset(out)
	if _, err := w.Write(p.doc); err != nil {
		return nil, err
	}
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func mapKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func appendPart(b, part []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(part)))
	return append(b, part...)
}

var errPackedDamaged = errors.New("packed run is damaged")

// decodePacked reads a pk field: the document alone with docOnly, else
// every part. The parts share one buffer; nothing changes them.
func decodePacked(b []byte, docOnly bool) (*packed, error) {
	if len(b) == 0 || b[0] != packFormat {
		return nil, fmt.Errorf("%w: format %v, want %d", errPackedDamaged, b[:min(len(b), 1)], packFormat)
	}
	docLen, n := binary.Uvarint(b[1:])
	if n <= 0 || docLen > maxPackedPart {
		return nil, fmt.Errorf("%w: bad document length", errPackedDamaged)
	}
	zr := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(zr)
	if err := zr.(flate.Resetter).Reset(bytes.NewReader(b[1+n:]), packDict); err != nil {
		return nil, err
	}
	p := &packed{}
	if docOnly {
		p.doc = make([]byte, docLen)
		if _, err := io.ReadFull(zr, p.doc); err != nil {
			return nil, fmt.Errorf("%w: document: %v", errPackedDamaged, err)
		}
		return p, nil
	}
	var all bytes.Buffer
	all.Grow(int(min(docLen, 1<<20)) * 6)
	if _, err := all.ReadFrom(zr); err != nil {
		return nil, fmt.Errorf("%w: %v", errPackedDamaged, err)
	}
	rest := all.Bytes()
	if uint64(len(rest)) < docLen {
		return nil, fmt.Errorf("%w: document cut short", errPackedDamaged)
	}
	p.doc, rest = rest[:docLen:docLen], rest[docLen:]
	var err error
	if p.cids, rest, err = readPart(rest); err != nil {
		return nil, err
	}
	nOut, rest, err := readCount(rest)
	if err != nil {
		return nil, err
	}
	p.outputs = make(map[string][]byte, nOut)
	for range nOut {
		var k, v []byte
		if k, rest, err = readPart(rest); err != nil {
			return nil, err
		}
		if v, rest, err = readPart(rest); err != nil {
			return nil, err
		}
		p.outputs[string(k)] = v
	}
	nEv, rest, err := readCount(rest)
	if err != nil {
		return nil, err
	}
	p.evidence = make([][]byte, nEv)
	for i := range p.evidence {
		if p.evidence[i], rest, err = readPart(rest); err != nil {
			return nil, err
		}
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the evidence", errPackedDamaged, len(rest))
	}
	return p, nil
}

// readCount reads a count of parts, each at least one byte long.
func readCount(b []byte) (int, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return 0, nil, fmt.Errorf("%w: bad count", errPackedDamaged)
	}
	return int(n), b[k:], nil
}

func readPart(b []byte) (part, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("%w: a part runs past the end", errPackedDamaged)
	}
	end := k + int(n)
	return b[k:end:end], b[end:], nil
}

// lrange is LRANGE's [start, stop] of entries (negative counts from the
// end).
func lrange(entries [][]byte, start, stop int64) [][]byte {
	n := int64(len(entries))
	if start < 0 {
		start = max(n+start, 0)
	}
	if stop < 0 {
		stop = n + stop
	}
	stop = min(stop, n-1)
	if start > stop || start >= n {
		return [][]byte{}
	}
	return entries[start : stop+1]
}

// errPacked is the commit script's {3}: the run must be unpacked first.
var errPacked = errors.New("store: run is packed")

// PackRun packs a run (see packField) at the version it reads, and takes
// it out of IndexPack: it replies true when it packed the run, false when
// the run was packed already. ErrNotFound if the run is absent;
// *ConflictError if a commit moved it meanwhile (nothing written).
func (r *Redis) PackRun(ctx context.Context, runID string) (bool, error) {
	if err := validRunID(runID); err != nil {
		return false, err
	}
	if err := r.ensureMeta(ctx); err != nil {
		return false, err
	}
	runKey, outKey, evKey := r.runKeys(runID)
	var (
		head *redis.SliceCmd
		outs *redis.MapStringStringCmd
		evs  *redis.StringSliceCmd
	)
	// Not atomic, and need not be: every commit raises the version, and
	// the script writes only while it is the one read first.
	err := r.pipelined(ctx, false, func(p redis.Pipeliner) error {
		head = p.HMGet(ctx, runKey, "v", "doc", packField, "cids")
		outs = p.HGetAll(ctx, outKey)
		evs = p.LRange(ctx, evKey, 0, -1)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: pack run %s: %w", runID, err)
	}
	vals := head.Val()
	if len(vals) != 4 || vals[0] == nil {
		return false, ErrNotFound
	}
	version, _ := vals[0].(string)
	p := &packed{outputs: make(map[string][]byte, len(outs.Val())), evidence: make([][]byte, len(evs.Val()))}
	var pk []byte // empty when the run reads as packed already
	if vals[2] == nil {
		doc, ok := vals[1].(string)
		if !ok {
			return false, fmt.Errorf("store: pack run %s: the run has no document", runID)
		}
		p.doc = []byte(doc)
		if cids, ok := vals[3].(string); ok {
			p.cids = []byte(cids)
		}
		for k, v := range outs.Val() {
			p.outputs[k] = []byte(v)
		}
		for i, e := range evs.Val() {
			p.evidence[i] = []byte(e)
		}
		if pk, err = encodePacked(p); err != nil {
			return false, fmt.Errorf("store: pack run %s: %w", runID, err)
		}
	}
	// An already packed run goes to the script too: it leaves the index.
	res, err := packScript.Run(ctx, r.c, []string{runKey, outKey, evKey, r.IndexKey(r.BucketOf(runID), IndexPack)},
		version, pk, len(p.evidence), len(p.outputs), runID).Slice()
	if err != nil {
		return false, fmt.Errorf("store: pack run %s: %w", runID, err)
	}
	code, _ := res[0].(int64)
	switch {
	case code == 1:
		return true, nil
	case code == 2:
		return false, nil
	case code == 0 && len(res) == 2:
		v, err := parseVersion(res[1])
		if err != nil {
			return false, fmt.Errorf("store: pack run %s: %w", runID, err)
		}
		if v < 0 {
			return false, ErrNotFound
		}
		return false, &ConflictError{Version: v}
	}
	return false, fmt.Errorf("store: pack run %s: unexpected script reply %v", runID, res)
}

// unpack writes a packed run back as its three keys (CommitRun, before a
// commit to it) and puts it back in IndexPack. A run unpacked meanwhile
// is left as it is.
func (r *Redis) unpack(ctx context.Context, runID string) error {
	runKey, outKey, evKey := r.runKeys(runID)
	vals, err := r.c.HMGet(ctx, runKey, "v", genField, packField).Result()
	if err != nil {
		return fmt.Errorf("store: unpack run %s: %w", runID, err)
	}
	pk, ok := vals[2].(string)
	if !ok {
		return nil
	}
	p, err := decodePacked([]byte(pk), false)
	if err != nil {
		return fmt.Errorf("store: unpack run %s: %w", runID, err)
	}
	args := make([]any, 0, 8+2*len(p.outputs)+len(p.evidence))
	args = append(args, vals[0], vals[1], p.doc, p.cids, len(p.outputs), len(p.evidence), runID, r.now().UnixMilli())
	for k, v := range p.outputs {
		args = append(args, k, v)
	}
	for _, e := range p.evidence {
		args = append(args, e)
	}
	keys := []string{runKey, outKey, evKey, r.IndexKey(r.BucketOf(runID), IndexPack)}
	if err := unpackScript.Run(ctx, r.c, keys, args...).Err(); err != nil {
		return fmt.Errorf("store: unpack run %s: %w", runID, err)
	}
	return nil
}

// PackedField is the run hash field PackRun stores a packed run in.
const PackedField = packField

// EncodePacked is the PackedField value of a run with these parts, as
// PackRun writes it: for tools that write runs in bulk (the store-size
// benchmark's clones).
func EncodePacked(doc []byte, outputs map[string][]byte, evidence [][]byte) ([]byte, error) {
	return encodePacked(&packed{doc: doc, outputs: outputs, evidence: evidence})
}

// DecodePacked is EncodePacked's inverse.
func DecodePacked(b []byte) (doc []byte, outputs map[string][]byte, evidence [][]byte, err error) {
	p, err := decodePacked(b, false)
	if err != nil {
		return nil, nil, nil, err
	}
	return p.doc, p.outputs, p.evidence, nil
}
