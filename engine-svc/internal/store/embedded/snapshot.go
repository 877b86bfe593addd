package embedded

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
)

const (
	snapshotFormat = "realm-embedded-store"
	// snapshotVersion 2 adds journal_gen; version 1 files (no journal) load
	// as a base with no journal.
	snapshotVersion = 2
)

// snapshot is the file's content: every key of database 0 with its type,
// value and absolute expiry.
type snapshot struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	SavedAt time.Time `json:"saved_at"`
	// JournalGen is the first journal generation this base does not hold.
	JournalGen int64   `json:"journal_gen,omitempty"`
	Keys       []entry `json:"keys"`
}

type entry struct {
	Key  blob   `json:"key"`
	Type string `json:"type"` // string, hash, list, set, zset
	// ExpireAtMS is the unix time (ms) the key expires; 0 = never.
	ExpireAtMS int64     `json:"expire_at_ms,omitempty"`
	String     *blob     `json:"string,omitempty"`
	Hash       [][2]blob `json:"hash,omitempty"`
	List       []blob    `json:"list,omitempty"`
	Set        []blob    `json:"set,omitempty"`
	ZSet       []zmember `json:"zset,omitempty"`
}

type zmember struct {
	Member blob `json:"member"`
	// Score is text: JSON numbers cannot hold ±inf.
	Score string `json:"score"`
}

// blob is a binary-safe string: JSON text when it is valid UTF-8 (the
// common case, readable in the file), else {"b64": "..."}.
type blob string

func (b blob) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(b)) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"b64": base64.StdEncoding.EncodeToString([]byte(b))})
}

func (b *blob) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*b = blob(s)
		return nil
	}
	var o struct {
		B64 *string `json:"b64"`
	}
	if err := json.Unmarshal(data, &o); err != nil || o.B64 == nil {
		return errors.New("value is neither a string nor {\"b64\": ...}")
	}
	raw, err := base64.StdEncoding.DecodeString(*o.B64)
	if err != nil {
		return fmt.Errorf("bad base64 value: %w", err)
	}
	*b = blob(raw)
	return nil
}

func encode(s *snapshot) ([]byte, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("embedded: encode snapshot: %w", err)
	}
	return data, nil
}

// decode parses and checks a snapshot; any structural fault is an error.
func decode(data []byte) (*snapshot, error) {
	var s snapshot
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the snapshot")
	}
	if s.Format != snapshotFormat {
		return nil, fmt.Errorf("format is %q, want %q", s.Format, snapshotFormat)
	}
	if s.Version != 1 && s.Version != snapshotVersion {
		return nil, fmt.Errorf("snapshot version %d, this build reads %d", s.Version, snapshotVersion)
	}
	if s.JournalGen < 0 {
		return nil, errors.New("negative journal generation")
	}
	for i, e := range s.Keys {
		if e.Key == "" {
			return nil, fmt.Errorf("key %d has no name", i)
		}
		switch e.Type {
		case "string":
			if e.String == nil {
				return nil, fmt.Errorf("string key %q has no value", e.Key)
			}
		case "hash", "list", "set":
		case "zset":
			for _, z := range e.ZSet {
				if _, err := strconv.ParseFloat(z.Score, 64); err != nil {
					return nil, fmt.Errorf("zset %q: score %q is not a number", e.Key, z.Score)
				}
			}
		default:
			return nil, fmt.Errorf("key %q has unknown type %q", e.Key, e.Type)
		}
		if e.ExpireAtMS < 0 {
			return nil, fmt.Errorf("key %q has a negative expiry", e.Key)
		}
	}
	return &s, nil
}

// load writes a snapshot into m and returns the number of keys restored.
// Keys whose expiry passed while the store was down are dropped.
func load(ctx context.Context, m *miniredis.Miniredis, s *snapshot, now time.Time) (int, error) {
	n := 0
	for i, e := range s.Keys {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return n, err
			}
		}
		var ttl time.Duration
		if e.ExpireAtMS > 0 {
			ttl = time.UnixMilli(e.ExpireAtMS).Sub(now)
			if ttl <= 0 {
				continue
			}
		}
		k := string(e.Key)
		var err error
		switch e.Type {
		case "string":
			err = m.Set(k, string(*e.String))
		case "hash":
			fv := make([]string, 0, 2*len(e.Hash))
			for _, p := range e.Hash {
				fv = append(fv, string(p[0]), string(p[1]))
			}
			if len(fv) > 0 {
				m.HSet(k, fv...)
			}
		case "list":
			if len(e.List) > 0 {
				_, err = m.Push(k, strs(e.List)...)
			}
		case "set":
			if len(e.Set) > 0 {
				_, err = m.SetAdd(k, strs(e.Set)...)
			}
		case "zset":
			for _, z := range e.ZSet {
				score, _ := strconv.ParseFloat(z.Score, 64) // checked by decode
				if _, err = m.ZAdd(k, score, string(z.Member)); err != nil {
					break
				}
			}
		}
		if err != nil {
			return n, fmt.Errorf("embedded: restore %q: %w", k, err)
		}
		if !m.Exists(k) {
			continue // an empty aggregate: Redis keeps no such key
		}
		if ttl > 0 {
			m.SetTTL(k, ttl)
		}
		n++
	}
	return n, nil
}

func strs(bs []blob) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// dumpDirect snapshots the server through miniredis's Go API. The caller
// keeps writes out while it runs (the journal lock), so it is one point in
// time.
func dumpDirect(m *miniredis.Miniredis, log *slog.Logger) (*snapshot, error) {
	now := time.Now()
	s := &snapshot{Format: snapshotFormat, Version: snapshotVersion, SavedAt: now.UTC()}
	for _, k := range m.Keys() {
		e := entry{Key: blob(k), Type: m.Type(k)}
		switch ttl := m.TTL(k); {
		case ttl <= spent:
			continue // expired; its deletion is on its way (ttl.go)
		case ttl > 0:
			e.ExpireAtMS = now.Add(ttl).UnixMilli()
		}
		var err error
		switch e.Type {
		case "string":
			var v string
			v, err = m.Get(k)
			b := blob(v)
			e.String = &b
		case "hash":
			var fields []string
			fields, err = m.HKeys(k)
			for _, f := range fields {
				e.Hash = append(e.Hash, [2]blob{blob(f), blob(m.HGet(k, f))})
			}
		case "list":
			var vs []string
			vs, err = m.List(k)
			e.List = blobs(vs)
		case "set":
			var vs []string
			vs, err = m.Members(k)
			e.Set = blobs(vs)
		case "zset":
			var zs map[string]float64
			zs, err = m.SortedSet(k)
			for mem, sc := range zs {
				e.ZSet = append(e.ZSet, zmember{Member: blob(mem), Score: strconv.FormatFloat(sc, 'g', -1, 64)})
			}
		default:
			log.Warn("embedded store does not persist this key type", "key", k, "type", e.Type)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("embedded: dump %q: %w", k, err)
		}
		s.Keys = append(s.Keys, e)
	}
	return s, nil
}

func blobs(vs []string) []blob {
	out := make([]blob, len(vs))
	for i, v := range vs {
		out[i] = blob(v)
	}
	return out
}
