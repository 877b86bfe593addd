package embedded

import (
	"bufio"
	"io"
	"reflect"
	"time"
	"unsafe"

	"github.com/alicebob/miniredis/v2/server"
)

// TTLs. miniredis can age TTLs with the wall clock itself (ClockTTL), but
// it does so on every access to the data: each command, and each command
// inside a script, sorts every key of the database and walks them all, so
// a command costs O(n log n) in the size of the store (a 3,000-run store
// took 146 s to open). The embedded store leaves ClockTTL off and ages the
// TTLs itself, ttlTick apart, walking only the keys that have one.
//
// A key whose TTL runs out is deleted by a DEL run and journaled as a
// client's write is (as Redis propagates an expiry as a DEL), so a replay
// deletes it too instead of restarting its TTL. The DEL runs only if the
// TTL is still the spent one once the journal lock is held, so a key set
// again in between is left alone.

// ttlTick is how often TTLs are aged: a key outlives its TTL by at most
// about this much.
const ttlTick = 100 * time.Millisecond

// spent is the TTL an expired key is left with until its deletion runs:
// far below anything a client can set, so the script can tell it apart.
const spent = -time.Hour

// ttlLoop ages TTLs until the server stops.
func (s *Server) ttlLoop() {
	defer close(s.ttlDone)
	t := time.NewTicker(ttlTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			for _, key := range s.ageTTLs(now.Sub(last)) {
				s.expire(key)
			}
			last = now
		}
	}
}

// expire deletes key if its TTL is still spent. A refused write (the
// store cannot persist) leaves it spent, to be tried again next tick.
func (s *Server) expire(key string) {
	peer := server.NewPeer(bufio.NewWriter(io.Discard))
	_, seq, err := s.runIf(peer, []string{"DEL", key}, func() bool {
		s.m.Lock()
		defer s.m.Unlock()
		ttls, ok := ttlMap(s.m)
		v, has := ttls[key]
		return ok && has && v <= spent
	})
	if err == nil {
		_ = s.waitSynced(seq)
	}
}

// ageTTLs takes elapsed off every TTL of database 0 and returns the keys
// whose TTL ran out (their TTL is now spent).
func (s *Server) ageTTLs(elapsed time.Duration) []string {
	if elapsed <= 0 {
		return nil
	}
	s.m.Lock()
	defer s.m.Unlock()
	ttls, ok := ttlMap(s.m)
	if !ok {
		return nil
	}
	var expired []string
	for k, v := range ttls {
		if v <= spent {
			expired = append(expired, k) // its deletion has not run yet
			continue
		}
		if v -= elapsed; v <= 0 {
			v = spent
			expired = append(expired, k)
		}
		ttls[k] = v
	}
	return expired
}

// ttlMap is database 0's TTL table (key → remaining TTL), read through
// reflection because miniredis keeps it unexported; the caller holds the
// miniredis lock. If an upgrade of miniredis renames the fields, ok is
// false, no TTL ever runs out, and TestKeysExpireWithTheirTTL fails.
func ttlMap(m any) (ttls map[string]time.Duration, ok bool) {
	dbs := reflect.ValueOf(m).Elem().FieldByName("dbs")
	if !dbs.IsValid() || dbs.Kind() != reflect.Map {
		return nil, false
	}
	db := dbs.MapIndex(reflect.ValueOf(0))
	if !db.IsValid() || db.Kind() != reflect.Pointer || db.IsNil() {
		return nil, false
	}
	f := db.Elem().FieldByName("ttl")
	if !f.IsValid() || f.Type() != reflect.TypeFor[map[string]time.Duration]() {
		return nil, false
	}
	return *(*map[string]time.Duration)(unsafe.Pointer(f.UnsafeAddr())), true
}
