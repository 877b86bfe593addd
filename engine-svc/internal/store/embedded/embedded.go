// Package embedded runs an in-process Redis (miniredis) on 127.0.0.1 so a
// laptop runs the very same go-redis store code as production, with no
// Redis to install.
//
// Persistence. The data lives in memory and on disk in the data directory
// as a base file (store.snapshot.json) plus a journal
// (store.journal.<generation>). Every write command (and every MULTI…EXEC
// transaction) is run and appended to the journal under one lock, so the
// journal's order is the execution order, and the journal is fsynced
// before the reply is sent: an acknowledged write survives kill -9 and
// power loss. Replies wait at the socket, not in the command (conn.go):
// a connection's next commands run while its replies wait for the fsync,
// so the writes of a pipeline share an fsync as concurrent connections do
// (group commit), and no reply, to a read either, leaves before every
// write that ran before it is on disk. Scripts
// called by EVALSHA are journaled as EVAL with their body, so a replay
// needs no script cache; the store's commit script, the one every run
// change goes through, is not run in Lua at all: it is done in Go
// (store.CommitScript) and journaled as the MULTI…EXEC of its writes.
//
// Open loads the base, replays the journals after it, then writes a new
// base and starts a fresh journal. A torn last record (a crash mid-append,
// never acknowledged) is dropped and logged; any other fault stops Open
// with an error naming the file and offset. When the journal grows past
// compactAt, the journal is rotated and the state at the cut written as
// the new base in the background (temp file, fsync, rename, fsync dir);
// commands wait only for the rotation: the state at the cut is rebuilt in
// a miniredis of its own from the base and journals on disk.
//
// Failure. If an append fails (disk full, read-only directory, I/O
// error) the command gets an error reply ("embedded store cannot persist
// …"), which the engine reports as ENGINE_STORE_FAILED; nothing is
// acknowledged. If an fsync fails, the connections waiting for it are
// closed unanswered, and so is any connection with a reply to send until
// a base is written as below: a later fsync's success says nothing of the
// pages the failed one lost. The command has already run in memory, so
// from then on every write is refused (reads keep working, after a failed
// append) until a full base of the memory plus a fresh journal is
// written, tried once a second: writes resume when the disk does. A
// refused write may therefore still appear after recovery or a restart,
// whole, never in part.
//
// Limits: only database 0 is persisted (SELECT of another database is
// refused), WATCH and blocking commands are refused, and only strings,
// hashes, lists, sets and sorted sets (with their TTLs) are in the base.
// A replayed relative TTL (SET … PX) restarts at replay. One process at a
// time may open a directory (an advisory lock on Unix).
package embedded

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/realm-go/realm/engine-svc/internal/store"
)

// SnapshotFile is the base file's name inside the data directory.
const SnapshotFile = "store.snapshot.json"

// tick is how often the background loop checks for compaction and retries
// persisting after a failure.
const tick = time.Second

// compactAt is the journal size that triggers a compaction.
const compactAt = 64 << 20

// Server is a running embedded Redis.
type Server struct {
	m      *miniredis.Miniredis
	srv    *server.Server // captured once: m.Server() turns nil during Close
	dir    string
	log    *slog.Logger
	unlock func()

	// syncMu orders fsyncs (group commit); taken before jmu when both are.
	syncMu sync.Mutex
	// synced is the count of records known to be on disk; set under
	// syncMu, read without it (a connection's replies wait for it to
	// reach written, conn.go).
	synced atomic.Int64
	// syncErr is a failed fsync's error, kept until a base of the memory
	// is written (see waitSynced).
	syncErr error
	// syncJournal is the group commit's fsync: (*os.File).Sync, which
	// tests replace to hold or fail it.
	syncJournal func(*os.File) error
	listener    net.Listener
	acceptDone  chan struct{}
	senders     sync.WaitGroup // every durableConn's sender
	maxPending  atomic.Int64   // see conn.go

	// jmu serialises write commands with their journal append.
	jmu      sync.Mutex
	journal  *os.File
	gen      int64        // generation of journal
	size     int64        // bytes in journal
	written  atomic.Int64 // records appended, over all generations; set under jmu
	baseSeq  int64        // written when the last base was cut
	scripts  map[string]string
	inTx     map[*server.Peer]*txState
	recBuf   []byte
	replyBuf bytes.Buffer

	// failed holds the persistence failure while writes are refused.
	failed atomic.Pointer[error]
	// current is the scratch peer run() dispatches the write on, which
	// the hook lets through.
	current atomic.Pointer[server.Peer]

	compactMu sync.Mutex

	stop      chan struct{}
	done      chan struct{}
	ttlDone   chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// nestedInScript reports a command a Lua script issues: miniredis runs
// those through Dispatch too, on a peer whose context is marked nested.
// The field is unexported, hence reflection; if a miniredis upgrade renames
// it, script writes deadlock and TestJournalReplaysScriptsAndTransactions
// (and every store test) times out.
func nestedInScript(p *server.Peer) bool {
	if p.Ctx == nil {
		return false
	}
	v := reflect.ValueOf(p.Ctx)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	f := v.Elem().FieldByName("nested")
	return f.IsValid() && f.Kind() == reflect.Bool && f.Bool()
}

type txState struct {
	active bool
	queued [][]string
}

// Open restores the data in dir (creating dir if needed), starts the
// server on a random 127.0.0.1 port and starts journaling. A corrupt base
// or journal is an error naming the file, never a silent partial store.
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
		m:           miniredis.NewMiniRedis(),
		dir:         dir,
		log:         logger,
		unlock:      unlock,
		scripts:     map[string]string{},
		inTx:        map[*server.Peer]*txState{},
		syncJournal: (*os.File).Sync,
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		ttlDone:     make(chan struct{}),
	}
	// TTLs follow the wall clock, as in Redis, aged by ttlLoop (not
	// miniredis's ClockTTL, which walks every key on every command).
	gen, n, err := s.restore(ctx)
	if err != nil {
		unlock()
		return nil, err
	}
	// miniredis listens itself unless started by Dial (its public way to
	// start without a listener); the store listens instead, to hold each
	// connection's replies until they are durable (conn.go).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded: start: %w", err)
	}
	pipe, err := s.m.Dial()
	if err != nil {
		_ = l.Close()
		unlock()
		return nil, fmt.Errorf("embedded: start: %w", err)
	}
	_ = pipe.Close()
	s.listener, s.acceptDone = l, make(chan struct{})
	s.maxPending.Store(maxPending)
	s.srv = s.m.Server()
	s.gen = gen
	replayed, err := s.replay(ctx, gen)
	if err != nil {
		_ = l.Close()
		s.m.Close()
		unlock()
		return nil, err
	}
	if _, err := os.Stat(s.Path()); err == nil && replayed == 0 {
		// Nothing since the base: its journal holds no whole record (at
		// most a torn one, dropped above), so starting it afresh is enough;
		// rewriting a base of 100,000 runs would add seconds to the start.
		if j, err := s.createJournal(s.gen); err == nil {
			s.journal = j
		} else {
			logger.Warn("embedded store could not start its journal", "dir", dir, "err", err)
		}
	}
	if s.journal == nil {
		// Start from a fresh base and journal: the torn tail, if any, is
		// gone and the next start replays nothing. If the disk refuses, the
		// store opens read-only and keeps retrying.
		s.failed.Store(ptr(errors.New("not yet persisted since start")))
		if err := s.recover(); err != nil {
			logger.Error("embedded store cannot persist; writes are refused until it can", "dir", dir, "err", err)
		}
	}
	s.srv.SetPreHook(s.hook)
	logger.Info("embedded store started", "addr", s.Addr(), "dir", dir, "keys", n, "journal_records", replayed)
	go s.serve(l)
	go s.loop()
	go s.ttlLoop()
	return s, nil
}

func ptr[T any](v T) *T { return &v }

// Addr is host:port of the server.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Path is the base file.
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

// refused commands cannot be journaled faithfully: a blocking write would
// hold the journal lock while it waits, WATCH makes EXEC's outcome depend
// on timing a replay cannot see.
var refused = map[string]string{
	"WATCH":      "WATCH is not supported by the embedded store (its journal replays transactions as they ran)",
	"BLPOP":      "blocking commands are not supported by the embedded store",
	"BRPOP":      "blocking commands are not supported by the embedded store",
	"BRPOPLPUSH": "blocking commands are not supported by the embedded store",
	"BLMOVE":     "blocking commands are not supported by the embedded store",
	"BLMPOP":     "blocking commands are not supported by the embedded store",
	"BZPOPMIN":   "blocking commands are not supported by the embedded store",
	"BZPOPMAX":   "blocking commands are not supported by the embedded store",
	"BZMPOP":     "blocking commands are not supported by the embedded store",
}

// hook is miniredis's pre-hook; it runs in the connection's goroutine.
// For a write it runs the command itself into a private buffer, appends
// the record, waits for the fsync and only then hands the reply to the
// peer, so no reply leaves before its write is on disk.
func (s *Server) hook(p *server.Peer, cmd string, args ...string) bool {
	if p == s.current.Load() || nestedInScript(p) {
		return false // part of the script being run (and journaled) now
	}
	if why, ok := refused[cmd]; ok {
		p.WriteError("ERR " + why)
		return true
	}
	switch cmd {
	case "SELECT":
		if len(args) == 1 && args[0] != "0" {
			p.WriteError("ERR the embedded store keeps only database 0")
			return true
		}
		return false
	case "SCRIPT":
		s.noteScript(args)
		return false
	case "MULTI":
		s.jmu.Lock()
		st := s.inTx[p]
		if st == nil {
			st = &txState{}
			s.inTx[p] = st
			p.OnDisconnect(func() { s.jmu.Lock(); delete(s.inTx, p); s.jmu.Unlock() })
		}
		if !st.active { // a nested MULTI is an error that keeps the queue
			st.active, st.queued = true, nil
		}
		s.jmu.Unlock()
		return false
	case "DISCARD":
		s.jmu.Lock()
		if st := s.inTx[p]; st != nil {
			st.active, st.queued = false, nil
		}
		s.jmu.Unlock()
		return false
	}
	if cmd != "EXEC" && (nonWrites[cmd] || s.srv.IsReadOnlyCommand(cmd)) {
		return false
	}
	full := append([]string{cmd}, args...)
	if (cmd == "EVALSHA" || cmd == "EVAL") && len(args) > 0 && store.IsCommitScript(cmd, args[0]) && !s.inTransaction(p) {
		s.commitNative(p, args[1:])
		return true
	}
	if cmd != "EXEC" {
		s.jmu.Lock()
		st := s.inTx[p]
		if st != nil && st.active {
			// Queued by miniredis; journaled with the EXEC.
			st.queued = append(st.queued, s.forJournal(full))
			s.jmu.Unlock()
			return false
		}
		s.jmu.Unlock()
	}
	if f := s.failed.Load(); f != nil {
		p.WriteError(refusal(*f))
		return true
	}
	reply, _, err := s.run(p, full)
	if err != nil {
		p.WriteError(err.Error())
		return true
	}
	p.WriteRaw(reply) // sent once its record is durable (conn.go)
	return true
}

// inTransaction reports whether p has a MULTI open (its commands are
// queued, to run at EXEC).
func (s *Server) inTransaction(p *server.Peer) bool {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	st := s.inTx[p]
	return st != nil && st.active
}

// commitNative runs the store's commit script without Lua: gopher-lua
// builds a fresh interpreter for every script call, which cost the
// embedded store most of a commit's time. Under jmu no other write can
// come between its reads and its writes, the writes run as one MULTI/EXEC
// (readers see all of them or none) and are journaled as that
// transaction, so a replay needs neither the script nor Lua.
func (s *Server) commitNative(p *server.Peer, args []string) {
	c, err := store.ParseCommitScript(args)
	if err != nil {
		p.WriteError(err.Error())
		return
	}
	if f := s.failed.Load(); f != nil {
		p.WriteError(refusal(*f))
		return
	}
	reply, _, err := s.runCommit(c)
	if err != nil {
		p.WriteError(err.Error())
		return
	}
	// Sent once its record is durable (conn.go).
	writeScriptReply(p, reply)
}

// writeScriptReply writes a script's reply as Redis does: an int64 as an
// integer, a string as a bulk string, a []any as an array of those.
func writeScriptReply(p *server.Peer, reply any) {
	switch v := reply.(type) {
	case int64:
		p.WriteInt(int(v))
	case string:
		p.WriteBulk(v)
	case []any:
		p.WriteLen(len(v))
		for _, e := range v {
			writeScriptReply(p, e)
		}
	}
}

// runCommit reads what the commit script reads, decides, and applies and
// journals its writes, all under jmu. seq is 0 when nothing was written.
func (s *Server) runCommit(c *store.CommitScript) (reply any, seq int64, err error) {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if f := s.failed.Load(); f != nil {
		return nil, 0, errors.New(refusal(*f))
	}
	var r store.CommitReads
	r.IDs = s.m.HGet(c.RunKey(), "cids")
	r.Version = s.m.HGet(c.RunKey(), "v")
	r.HasIDs, r.HasV = r.IDs != "", r.Version != ""
	r.Packed = s.m.HGet(c.RunKey(), "pk") != ""
	if c.IdemOn() {
		switch h, err := s.m.Get(c.IdemKey()); {
		case err == nil:
			r.Holder = h
		case !errors.Is(err, miniredis.ErrKeyNotFound):
			return nil, 0, fmt.Errorf("ERR commit script: read %s: %v", c.IdemKey(), err)
		}
	}
	reply, writes := c.Decide(r)
	if len(writes) == 0 {
		return reply, 0, nil
	}
	cmds := make([][]string, 0, len(writes)+2)
	cmds = append(cmds, []string{"MULTI"})
	cmds = append(cmds, writes...)
	cmds = append(cmds, []string{"EXEC"})
	s.replyBuf.Reset()
	w := bufio.NewWriter(&s.replyBuf)
	tmp := server.NewPeer(w)
	s.current.Store(tmp)
	for _, cmd := range cmds {
		s.srv.Dispatch(tmp, cmd)
	}
	s.current.Store(nil)
	_ = w.Flush()
	// The writes' replies are integers and +OK; an error among them (a
	// key of the wrong type) fails the commit as it fails the script,
	// with the writes before it done, and journaled, as Redis keeps them.
	failed := ""
	if out := s.replyBuf.String(); strings.Contains(out, "\r\n-") {
		failed = out[strings.Index(out, "\r\n-")+3:]
		failed = "ERR commit script: " + strings.TrimPrefix(failed[:strings.Index(failed, "\r\n")], "ERR ")
	}

	seq, err = s.appendRecord(cmds)
	if err != nil {
		return nil, 0, err
	}
	if failed != "" {
		return nil, 0, errors.New(failed)
	}
	return reply, seq, nil
}

// run executes one write (or EXEC) and appends its record, under jmu.
func (s *Server) run(p *server.Peer, full []string) (reply string, seq int64, err error) {
	return s.runIf(p, full, nil)
}

// errNotRun is runIf's answer when its guard said no.
var errNotRun = errors.New("embedded: guard refused the write")

// runIf is run, done only if guard (when set) still holds once jmu is
// taken: no other write can come between the guard and the write.
func (s *Server) runIf(p *server.Peer, full []string, guard func() bool) (reply string, seq int64, err error) {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if f := s.failed.Load(); f != nil {
		return "", 0, errors.New(refusal(*f))
	}
	if guard != nil && !guard() {
		return "", 0, errNotRun
	}
	var cmds [][]string
	if full[0] == "EXEC" {
		st := s.inTx[p]
		cmds = [][]string{{"MULTI"}}
		if st != nil {
			cmds = append(cmds, st.queued...)
			st.active, st.queued = false, nil
		}
		cmds = append(cmds, full)
	} else {
		cmds = [][]string{s.forJournal(full)}
	}
	s.replyBuf.Reset()
	w := bufio.NewWriter(&s.replyBuf)
	tmp := server.NewPeer(w)
	tmp.Ctx, tmp.Resp3, tmp.ClientName = p.Ctx, p.Resp3, p.ClientName
	s.current.Store(tmp)
	s.srv.Dispatch(tmp, full)
	s.current.Store(nil)
	_ = w.Flush()
	p.Ctx, p.Resp3 = tmp.Ctx, tmp.Resp3
	reply = s.replyBuf.String()

	seq, err = s.appendRecord(cmds)
	if err != nil {
		return "", 0, err
	}
	return reply, seq, nil
}

// appendRecord appends the journal record of cmds, which have just run, and
// returns its sequence number; a failed append refuses writes from now on.
// Called with jmu held.
func (s *Server) appendRecord(cmds [][]string) (int64, error) {
	s.recBuf = encodeRecord(s.recBuf[:0], cmds)
	n, werr := s.journal.Write(s.recBuf)
	s.size += int64(n)
	if werr != nil {
		err := fmt.Errorf("append to %s: %w", s.journal.Name(), werr)
		s.fail(err)
		return 0, errors.New(refusal(err))
	}
	return s.written.Add(1), nil
}

// forJournal rewrites EVALSHA as EVAL with the script body, so a replay
// needs no script cache; it also remembers EVAL's scripts.
func (s *Server) forJournal(full []string) []string {
	switch full[0] {
	case "EVAL":
		if len(full) > 1 {
			s.scripts[sha1Hex(full[1])] = full[1]
		}
	case "EVALSHA":
		if len(full) > 1 {
			if body, ok := s.scripts[strings.ToLower(full[1])]; ok {
				out := append([]string{"EVAL", body}, full[2:]...)
				return out
			}
		}
	}
	return full
}

// noteScript follows SCRIPT LOAD and SCRIPT FLUSH.
func (s *Server) noteScript(args []string) {
	if len(args) == 0 {
		return
	}
	s.jmu.Lock()
	defer s.jmu.Unlock()
	switch strings.ToUpper(args[0]) {
	case "LOAD":
		if len(args) == 2 {
			s.scripts[sha1Hex(args[1])] = args[1]
		}
	case "FLUSH":
		s.scripts = map[string]string{}
	}
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// refusal is the error reply of a write the store cannot persist.
func refusal(cause error) string {
	return fmt.Sprintf("ERR embedded store cannot persist writes (%v); this write was refused and not acknowledged. Reads still work; writes resume once the data directory accepts writes again", cause)
}

// fail refuses writes from now on; called with jmu held.
func (s *Server) fail(err error) {
	if s.failed.CompareAndSwap(nil, &err) {
		s.log.Error("embedded store cannot persist; refusing writes until it can", "dir", s.dir, "err", err)
	}
}

// waitSynced returns once record seq is on disk. The first waiter fsyncs
// everything appended so far; the others find their record covered.
//
// After a failed append the records before it are whole, so an fsync
// still makes them durable and their replies may go. After a failed
// fsync nothing past synced can be trusted to be on disk, even if a later
// fsync succeeds (Linux drops the dirty pages and reports the error
// once), until a base of the memory is written (writeMemoryLocked).
func (s *Server) waitSynced(seq int64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.synced.Load() >= seq {
		return nil
	}
	if s.syncErr != nil {
		return s.syncErr
	}
	s.jmu.Lock()
	f, w := s.journal, s.written.Load()
	s.jmu.Unlock()
	if err := s.syncJournal(f); err != nil {
		err = fmt.Errorf("fsync %s: %w", f.Name(), err)
		s.syncErr = err
		s.jmu.Lock()
		s.fail(err)
		s.jmu.Unlock()
		return err
	}
	s.synced.Store(w)
	return nil
}

func (s *Server) loop() {
	defer close(s.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.failed.Load() != nil {
				if err := s.recover(); err != nil {
					s.log.Warn("embedded store still cannot persist", "dir", s.dir, "err", err)
				}
				continue
			}
			s.jmu.Lock()
			big := s.size >= compactAt
			s.jmu.Unlock()
			if big {
				if err := s.compact(); err != nil {
					s.log.Error("embedded store compaction failed", "dir", s.dir, "err", err)
				}
			}
		}
	}
}

// Snapshot compacts now if anything was written since the last base: the
// journal is rotated and the data at that cut written as the new base.
func (s *Server) Snapshot(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.failed.Load() != nil {
		return s.recover()
	}
	return s.compact()
}

// compact rotates the journal and writes the state at the cut as the new
// base. Commands wait only for the rotation (an fsync and a file
// creation): the state at the cut is rebuilt apart, in a miniredis of its
// own, from the base on disk and the journals since, which hold exactly
// the writes up to the cut in the order they ran.
func (s *Server) compact() error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.syncMu.Lock()
	s.jmu.Lock()
	if s.failed.Load() != nil || s.written.Load() == s.baseSeq {
		s.jmu.Unlock()
		s.syncMu.Unlock()
		return nil
	}
	// Everything in the old journal is on disk before the cut.
	if err := s.journal.Sync(); err != nil {
		err = fmt.Errorf("fsync %s: %w", s.journal.Name(), err)
		s.syncErr = err
		s.fail(err)
		s.jmu.Unlock()
		s.syncMu.Unlock()
		return err
	}
	s.synced.Store(s.written.Load())
	next, err := s.createJournal(s.gen + 1)
	if err != nil {
		// Keep appending to the current journal; nothing is lost.
		s.jmu.Unlock()
		s.syncMu.Unlock()
		return err
	}
	_ = s.journal.Close()
	cut := s.gen
	s.journal, s.gen, s.size, s.baseSeq = next, s.gen+1, 0, s.written.Load()
	s.jmu.Unlock()
	s.syncMu.Unlock()

	snap, err := s.rebuild(cut)
	if err != nil {
		// The base or a journal on disk is not what this process wrote
		// (moved, damaged): write the whole memory instead, with writes
		// held, as after a failure.
		s.log.Warn("embedded store could not rebuild the state at the cut from disk; writing the memory as the base", "dir", s.dir, "err", err)
		return s.writeMemory()
	}
	// The old journals stay until the base that covers them is durable.
	snap.JournalGen = cut + 1
	if err := s.writeBase(snap); err != nil {
		return err
	}
	return removeJournalsBefore(s.dir, cut+1)
}

// rebuild returns the state after journal generation cut: the base on
// disk with the journals from its generation through cut replayed onto
// it, in a miniredis of its own (the live one keeps serving).
func (s *Server) rebuild(cut int64) (*snapshot, error) {
	m := miniredis.NewMiniRedis()
	defer m.Close()
	ctx := context.Background()
	from, _, err := loadBase(ctx, m, s.Path())
	if err != nil {
		return nil, err
	}
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded: compaction: %w", err)
	}
	if _, _, err := replayJournals(ctx, m.Server(), s.dir, from, cut, s.log); err != nil {
		return nil, fmt.Errorf("embedded: compaction: %w", err)
	}
	return dumpDirect(m, s.log)
}

// recover writes the whole memory as a base and starts a fresh journal,
// then lets writes through again. Writes are refused meanwhile.
func (s *Server) recover() error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.failed.Load() == nil {
		return nil
	}
	return s.writeMemoryLocked()
}

// writeMemory writes the whole memory as a base and starts a fresh
// journal, holding writes meanwhile. The caller holds compactMu.
func (s *Server) writeMemory() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.jmu.Lock()
	defer s.jmu.Unlock()
	return s.writeMemoryLocked()
}

// writeMemoryLocked is writeMemory with syncMu and jmu held; it clears a
// persistence failure once it succeeds.
func (s *Server) writeMemoryLocked() error {
	gen := s.gen + 1
	snap, err := dumpDirect(s.m, s.log)
	if err != nil {
		return err
	}
	snap.JournalGen = gen
	// The base first: journal gen must not gain records before a base
	// covers everything the failed journal lost.
	if err := s.writeBase(snap); err != nil {
		return err
	}
	next, err := s.createJournal(gen)
	if err != nil {
		return err
	}
	if s.journal != nil {
		_ = s.journal.Close()
	}
	s.journal, s.gen, s.size, s.baseSeq = next, gen, 0, s.written.Load()
	s.synced.Store(s.written.Load())
	s.syncErr = nil
	s.failed.Store(nil)
	s.log.Info("embedded store wrote a base and started a fresh journal", "dir", s.dir, "journal", next.Name())
	if err := removeJournalsBefore(s.dir, gen); err != nil {
		s.log.Warn("embedded store: old journals left behind", "err", err)
	}
	return nil
}

// createJournal creates generation gen's empty journal durably.
func (s *Server) createJournal(gen int64) (*os.File, error) {
	path := filepath.Join(s.dir, journalName(gen))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded: create journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("embedded: create journal: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("embedded: create journal: %w", err)
	}
	return f, nil
}

// Close stops the server, waits for its connections, flushes the journal
// and releases the directory. Safe to call twice.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		<-s.ttlDone
		_ = s.listener.Close()
		<-s.acceptDone
		// Waits for every connection, so for their senders to send what
		// they held: nothing runs after this.
		s.m.Close()
		s.senders.Wait()
		s.syncMu.Lock()
		s.jmu.Lock()
		if s.journal != nil {
			if err := s.journal.Sync(); err != nil && s.failed.Load() == nil {
				s.closeErr = fmt.Errorf("embedded: final journal fsync: %w", err)
			}
			_ = s.journal.Close()
			s.journal = nil
		}
		s.jmu.Unlock()
		s.syncMu.Unlock()
		s.unlock()
	})
	return s.closeErr
}

// writeBase replaces the base file atomically.
func (s *Server) writeBase(snap *snapshot) error {
	snap.SavedAt = time.Now().UTC()
	data, err := encode(snap)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, SnapshotFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("embedded: base: %w", err)
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
		return fmt.Errorf("embedded: base: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("embedded: base: %w", err)
	}
	return nil
}

// syncDir makes a rename or a new file durable. Directories that cannot be
// synced on this OS (EINVAL) are not an error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil && !isSyncUnsupported(err) {
		return err
	}
	return nil
}

// restore loads the base file, if any, into the (not yet started) server
// and returns the journal generation it leads to and the keys restored.
func (s *Server) restore(ctx context.Context) (gen int64, n int, err error) {
	return loadBase(ctx, s.m, s.Path())
}

// loadBase loads the base file at path, if there is one, into m and
// returns the journal generation it leads to and the keys loaded.
func loadBase(ctx context.Context, m *miniredis.Miniredis, path string) (gen int64, n int, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("embedded: read snapshot: %w", err)
	}
	snap, err := decode(data)
	if err != nil {
		return 0, 0, fmt.Errorf("embedded: snapshot %s is corrupt (%v); move it aside to start with an empty store", path, err)
	}
	n, err = load(ctx, m, snap, time.Now())
	return snap.JournalGen, n, err
}

// replay applies the journals from generation gen on, in order, before
// any client can connect (the hook is not set yet). It leaves s.gen at the
// last generation seen.
func (s *Server) replay(ctx context.Context, gen int64) (int, error) {
	last, n, err := replayJournals(ctx, s.srv, s.dir, gen, -1, s.log)
	if last >= 0 {
		s.gen = last
	}
	return n, err
}

// replayJournals dispatches to srv the records of the journals in dir from
// generation from to generation to (-1: the newest), in order, and
// returns the last generation applied (-1 for none) and the records. Only
// the newest journal may end in a torn record (a crash mid-append), which
// is dropped and logged; when to is set, every journal must be whole.
func replayJournals(ctx context.Context, srv *server.Server, dir string, from, to int64, log *slog.Logger) (last int64, total int, err error) {
	last = -1
	gens, err := journalGens(dir)
	if err != nil {
		return last, 0, err
	}
	var todo []int64
	for _, g := range gens {
		if g >= from && (to < 0 || g <= to) {
			todo = append(todo, g)
		}
	}
	if to >= 0 && (len(todo) == 0 || todo[len(todo)-1] != to) {
		return last, 0, fmt.Errorf("embedded: journal %s is missing", journalName(to))
	}
	for i, g := range todo {
		if err := ctx.Err(); err != nil {
			return last, total, err
		}
		if g != from+int64(i) {
			return last, total, fmt.Errorf("embedded: journal %s is missing (found %s); the store was not opened", journalName(from+int64(i)), journalName(g))
		}
		path := filepath.Join(dir, journalName(g))
		n, torn, err := readJournal(path, to < 0 && i == len(todo)-1, func(cmds [][]string) {
			peer := server.NewPeer(bufio.NewWriter(io.Discard))
			for _, c := range cmds {
				srv.Dispatch(peer, c)
			}
		})
		total += n
		if err != nil {
			return last, total, err
		}
		if torn != nil {
			log.Warn("embedded store dropped a torn last journal record (a crash mid-write; it was never acknowledged)",
				"file", path, "offset", torn.Offset, "bytes", torn.Bytes)
		}
		last = g
	}
	return last, total, nil
}
