// Package embedded runs an in-process Redis (miniredis) on 127.0.0.1 so a
// laptop runs the very same go-redis store code as production, with no
// Redis to install.
//
// Persistence. The data lives in memory and is written to
// <dir>/store.snapshot.json: restored on Open, written about once a second
// while anything changed, and on Close. Each write goes to a temporary file
// that is fsynced and renamed over the snapshot, so a crash never leaves a
// torn snapshot. Every snapshot is a consistent point in time: it is read
// by one read-only script, which Redis runs atomically, so a run's
// document, outputs, evidence and indexes always agree.
//
// Durability. A crash (kill -9, power loss) can lose up to about one second
// of acknowledged writes, like Redis with `appendfsync everysec`. A clean
// Close loses nothing. Production uses a real Redis with `appendonly yes`
// and `appendfsync always` for the promise that no acknowledged write is
// lost (`everysec` there has the same one-second window as this package).
//
// Only database 0 is persisted, and only strings, hashes, lists, sets and
// sorted sets (with their TTLs); other types are skipped with a warning.
// One process at a time may open a directory (an advisory lock on Unix).
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"
)

// SnapshotFile is the snapshot's name inside the data directory.
const SnapshotFile = "store.snapshot.json"

// snapshotEvery is how often a changed store is written.
const snapshotEvery = time.Second

// Server is a running embedded Redis.
type Server struct {
	m      *miniredis.Miniredis
	srv    *server.Server // captured once: m.Server() turns nil during Close
	dir    string
	log    *slog.Logger
	client *redis.Client // the snapshotter's own connection
	unlock func()

	// writes counts write commands that have finished; saved is the count a
	// snapshot is known to contain.
	writes atomic.Int64
	saveMu sync.Mutex
	saved  int64

	hookMu sync.Mutex
	inside map[*server.Peer]bool

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Open restores the snapshot in dir (creating dir if needed), starts the
// server on a random 127.0.0.1 port and begins snapshotting. A corrupt
// snapshot is an error naming the file, never a silent empty store.
func Open(ctx context.Context, dir string, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded: create data dir: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		m:      miniredis.NewMiniRedis(),
		dir:    dir,
		log:    logger,
		unlock: unlock,
		inside: map[*server.Peer]bool{},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	// TTLs follow the wall clock, as in Redis (miniredis defaults to
	// manual FastForward).
	s.m.ClockTTL(true)
	n, err := s.restore(ctx)
	if err != nil {
		unlock()
		return nil, err
	}
	if err := s.m.StartAddr("127.0.0.1:0"); err != nil {
		unlock()
		return nil, fmt.Errorf("embedded: start: %w", err)
	}
	s.srv = s.m.Server()
	s.srv.SetPreHook(s.countWrites)
	s.client = redis.NewClient(&redis.Options{Addr: s.m.Addr(), MaxRetries: -1})
	logger.Info("embedded store started", "addr", s.m.Addr(), "dir", dir, "keys", n)
	go s.loop()
	return s, nil
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return s.m.Addr() }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.m.Addr() }

// Path is the snapshot file.
func (s *Server) Path() string { return filepath.Join(s.dir, SnapshotFile) }

// commands that change no data; everything else not read-only counts as a
// write. EXEC counts: it runs the writes queued since MULTI.
var nonWrites = map[string]bool{
	"PING": true, "ECHO": true, "HELLO": true, "CLIENT": true, "SELECT": true,
	"AUTH": true, "INFO": true, "COMMAND": true, "QUIT": true, "MULTI": true,
	"DISCARD": true, "WATCH": true, "UNWATCH": true, "SCRIPT": true,
	"READONLY": true, "READWRITE": true, "TIME": true, "SUBSCRIBE": true,
	"UNSUBSCRIBE": true, "PSUBSCRIBE": true, "PUNSUBSCRIBE": true, "PUBLISH": true,
}

// countWrites is miniredis's pre-hook. A pre-hook runs before the command,
// which is too early: a snapshot taken between the two would miss the write
// yet believe itself current. So for a write the hook runs the command
// itself (re-dispatching, marked so the nested call passes straight
// through) and counts it once it has finished.
func (s *Server) countWrites(p *server.Peer, cmd string, args ...string) bool {
	srv := s.srv
	if nonWrites[cmd] || srv.IsReadOnlyCommand(cmd) {
		return false
	}
	s.hookMu.Lock()
	if s.inside[p] {
		s.hookMu.Unlock()
		return false
	}
	s.inside[p] = true
	s.hookMu.Unlock()

	srv.Dispatch(p, append([]string{cmd}, args...))

	s.hookMu.Lock()
	delete(s.inside, p)
	s.hookMu.Unlock()
	s.writes.Add(1)
	return true
}

func (s *Server) loop() {
	defer close(s.done)
	t := time.NewTicker(snapshotEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := s.Snapshot(ctx); err != nil {
				s.log.Error("embedded store snapshot failed", "path", s.Path(), "err", err)
			}
			cancel()
		}
	}
}

// Snapshot writes the snapshot now if anything changed since the last one.
func (s *Server) Snapshot(ctx context.Context) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	w := s.writes.Load()
	if w == s.saved {
		return nil
	}
	snap, err := dumpLive(ctx, s.client)
	if err != nil {
		return err
	}
	if err := s.write(snap); err != nil {
		return err
	}
	// Writes finished before w was read are in the dump; later ones only
	// cause one more (harmless) snapshot.
	s.saved = w
	return nil
}

// Close stops the server, waits for its connections, writes a final
// snapshot and releases the directory. Safe to call twice.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		_ = s.client.Close()
		s.m.Close() // waits for every connection: nothing runs after this
		s.saveMu.Lock()
		defer s.saveMu.Unlock()
		if s.writes.Load() != s.saved {
			snap, err := dumpDirect(s.m, s.log)
			if err == nil {
				err = s.write(snap)
			}
			if err != nil {
				s.closeErr = fmt.Errorf("embedded: final snapshot: %w", err)
			}
		}
		s.unlock()
	})
	return s.closeErr
}

// write replaces the snapshot file atomically.
func (s *Server) write(snap *snapshot) error {
	data, err := encode(snap)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, SnapshotFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("embedded: snapshot: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.Path())
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("embedded: snapshot: %w", err)
	}
	syncDir(s.dir)
	return nil
}

// syncDir makes the rename durable; best effort (not every OS can sync a
// directory).
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	_ = d.Close()
}

// restore loads the snapshot file, if any, into the (not yet started)
// server and returns the number of keys restored.
func (s *Server) restore(ctx context.Context) (int, error) {
	data, err := os.ReadFile(s.Path())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("embedded: read snapshot: %w", err)
	}
	snap, err := decode(data)
	if err != nil {
		return 0, fmt.Errorf("embedded: snapshot %s is corrupt (%v); move it aside to start with an empty store", s.Path(), err)
	}
	return load(ctx, s.m, snap, time.Now())
}
