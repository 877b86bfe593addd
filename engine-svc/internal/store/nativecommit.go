package store

import (
	"fmt"
	"strconv"
	"strings"
)

// CommitScript is the commit script as a store that runs it without Lua
// sees it: the embedded store, which holds every other writer off while a
// commit runs (its journal lock), reads what the script reads, lets Decide
// choose, and applies the writes in one transaction. Decide is the Lua
// script of scripts.go in Go; the conformance suite (storetest), run on the
// embedded store, holds the two to the same behaviour.
type CommitScript struct {
	keys, argv []string
	nIdx       int
}

// IsCommitScript reports whether an EVALSHA names the commit script (sha
// as sent, any case), or an EVAL carries its body.
func IsCommitScript(cmd, script string) bool {
	switch strings.ToUpper(cmd) {
	case "EVALSHA":
		return strings.EqualFold(script, commitScript.Hash())
	case "EVAL":
		return script == commitSource
	}
	return false
}

// ParseCommitScript reads an EVAL/EVALSHA's arguments after the script:
// numkeys, KEYS, ARGV (layout at commitScript).
func ParseCommitScript(args []string) (*CommitScript, error) {
	if len(args) < 1 {
		return nil, fmt.Errorf("ERR wrong number of arguments for the commit script")
	}
	nk, err := strconv.Atoi(args[0])
	if err != nil || nk < 3 || nk > len(args)-1 {
		return nil, fmt.Errorf("ERR commit script: bad number of keys %q", args[0])
	}
	c := &CommitScript{keys: args[1 : 1+nk], argv: args[1+nk:]}
	if len(c.argv) < 12 {
		return nil, fmt.Errorf("ERR commit script: %d arguments, want at least 12", len(c.argv))
	}
	counts := make([]int, 4)
	for i := range counts {
		if counts[i], err = strconv.Atoi(c.argv[7+i]); err != nil || counts[i] < 0 {
			return nil, fmt.Errorf("ERR commit script: count %q is not a number", c.argv[7+i])
		}
	}
	nSet, nDel, nEv, nIdx := counts[0], counts[1], counts[2], counts[3]
	if want := 12 + 2*nSet + nDel + nEv + 3*nIdx; len(c.argv) != want {
		return nil, fmt.Errorf("ERR commit script: %d arguments, want %d", len(c.argv), want)
	}
	wantKeys := 3 + nIdx
	if c.IdemOn() {
		wantKeys++
	}
	if nk != wantKeys {
		return nil, fmt.Errorf("ERR commit script: %d keys, want %d", nk, wantKeys)
	}
	c.nIdx = nIdx
	return c, nil
}

// RunKey is the run hash the script reads (fields "cids", "v" and "pk").
func (c *CommitScript) RunKey() string { return c.keys[0] }

// IdemOn is whether the script checks and sets an idempotency key.
func (c *CommitScript) IdemOn() bool { return c.argv[3] == "1" }

// IdemKey is the idempotency key the script reads when IdemOn.
func (c *CommitScript) IdemKey() string { return c.keys[3+c.nIdx] }

// CommitReads are what the script reads before it decides: the run
// hash's "cids" and "v" (an absent field is "" with its flag false) and,
// when IdemOn, the idempotency key's holder ("" when absent, as the
// script reads it).
type CommitReads struct {
	IDs, Version string
	HasIDs, HasV bool
	Holder       string
	// Packed is whether the run hash has a pk field (packed.go).
	Packed bool
}

// Decide is the script's outcome given what it read: its reply (int64(1),
// or {0, version}, {2, holder, version}, {3, version} as []any of int64
// and string elements) and the
// commands that make the change, none when the commit is refused or is a
// repeat of one that landed.
func (c *CommitScript) Decide(r CommitReads) (reply any, writes [][]string) {
	a := c.argv
	cid := a[11]
	if r.HasIDs && cid != "" {
		for k := 0; k+len(cid) <= len(r.IDs); k += len(cid) {
			if r.IDs[k:k+len(cid)] == cid {
				return int64(1), nil
			}
		}
	}
	cur := r.Version
	if !r.HasV {
		cur = "-1"
	}
	if a[0] == "-1" {
		if r.HasV {
			return []any{int64(0), cur}, nil
		}
	} else if r.Packed {
		return []any{int64(3), cur}, nil
	} else if !r.HasV || r.Version != a[0] {
		return []any{int64(0), cur}, nil
	}
	if c.IdemOn() && r.Holder != a[4] {
		return []any{int64(2), r.Holder, cur}, nil
	}
	nSet, _ := strconv.Atoi(a[7])
	nDel, _ := strconv.Atoi(a[8])
	nEv, _ := strconv.Atoi(a[9])
	ids := r.IDs
	ids = ids[:min(len(ids), len(cid)*(commitRing-1))]
	writes = append(writes, []string{"HSET", c.keys[0], "v", a[1], "doc", a[2], "cids", cid + ids})
	i := 12
	batch := func(cmd, key string, n int) {
		if n > 0 {
			writes = append(writes, append([]string{cmd, key}, a[i:i+n]...))
			i += n
		}
	}
	batch("HSET", c.keys[1], 2*nSet)
	batch("HDEL", c.keys[1], nDel)
	batch("RPUSH", c.keys[2], nEv)
	for k := 0; k < c.nIdx; k++ {
		if a[i] == "a" {
			writes = append(writes, []string{"ZADD", c.keys[3+k], a[i+1], a[i+2]})
		} else {
			writes = append(writes, []string{"ZREM", c.keys[3+k], a[i+2]})
		}
		i += 3
	}
	if c.IdemOn() {
		if a[6] != "0" {
			writes = append(writes, []string{"SET", c.IdemKey(), a[5], "PX", a[6]})
		} else {
			writes = append(writes, []string{"SET", c.IdemKey(), a[5]})
		}
	}
	return int64(1), writes
}
