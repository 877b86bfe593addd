package embedded_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
)

// A reply leaves only once the journal records before it are on disk: a
// write's own, and, for a read, those of every write that ran before it
// (so nobody reads a write a crash could take back).
func TestRepliesWaitForTheFsync(t *testing.T) {
	dir := t.TempDir()
	srv, writer := open(t, dir)
	reader := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = reader.Close() })
	if err := reader.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var hold atomic.Bool
	hold.Store(true)
	srv.SetJournalSync(func(f *os.File) error {
		if hold.Load() {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		return f.Sync()
	})

	set := make(chan error, 1)
	go func() { set <- writer.Set(ctx, "k", "v", 0).Err() }()
	<-entered // the SET ran and was appended; its fsync is held
	get := make(chan string, 1)
	go func() { v, _ := reader.Get(ctx, "k").Result(); get <- v }()

	select {
	case err := <-set:
		t.Fatalf("the SET was answered (%v) before its record's fsync", err)
	case v := <-get:
		t.Fatalf("a GET saw %q before the write's fsync", v)
	case <-time.After(300 * time.Millisecond):
	}
	hold.Store(false)
	close(release)
	if err := <-set; err != nil {
		t.Fatalf("SET after the fsync: %v", err)
	}
	if v := <-get; v != "v" {
		t.Fatalf("GET after the fsync = %q, want v", v)
	}
}

// The replies of a pipeline share fsyncs: while one fsync runs the next
// commands run, and the next fsync covers them all. (Each used to wait
// for its own fsync before the next command was read: 64 here.)
func TestAPipelineSharesItsFsyncs(t *testing.T) {
	dir := t.TempDir()
	srv, c := open(t, dir)
	var fsyncs atomic.Int64
	srv.SetJournalSync(func(f *os.File) error {
		fsyncs.Add(1)
		time.Sleep(2 * time.Millisecond) // a slow disk: commands pile up
		return f.Sync()
	})
	const n = 64
	pipe := c.Pipeline()
	for i := range n {
		pipe.Set(ctx, "k"+strconv.Itoa(i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fsyncs.Load(); got > 8 {
		t.Errorf("a pipeline of %d writes took %d fsyncs, want at most 8", n, got)
	}
	_ = c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	_, c2 := open(t, dir)
	for i := range n {
		if v, err := c2.Get(ctx, "k"+strconv.Itoa(i)).Result(); err != nil || v != strconv.Itoa(i) {
			t.Fatalf("k%d after reopen = %q, %v", i, v, err)
		}
	}
}

// After a failed fsync nothing waiting on it is acknowledged, even though
// a later fsync succeeds (Linux reports a writeback error once and drops
// the pages); writes resume once the memory is written as a base.
func TestAFailedFsyncAcknowledgesNothing(t *testing.T) {
	dir := t.TempDir()
	srv, err := embedded.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv.SetJournalSync(func(f *os.File) error {
		if calls.Add(1) == 1 {
			return syscall.EIO
		}
		return f.Sync()
	})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	if err := c.Set(ctx, "unacked", "1", 0).Err(); err == nil {
		t.Fatal("a write whose fsync failed was acknowledged")
	}
	setOnceWritesResume(t, c, "after", "resumed", "the failed fsync")
	_ = c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	_, c2 := open(t, dir)
	if v, err := c2.Get(ctx, "after").Result(); err != nil || v != "resumed" {
		t.Fatalf("after = %q, %v", v, err)
	}
	// It ran in memory before its fsync failed: back whole, or not at all.
	if v, err := c2.Get(ctx, "unacked").Result(); err != redis.Nil && v != "1" {
		t.Fatalf("unacked = %q, %v", v, err)
	}
	if calls.Load() < 2 {
		t.Fatalf("%d fsyncs: the write that resumed was never synced", calls.Load())
	}
}

// Many connections, each pipelining, all answered in order.
func TestPipelinesOnManyConnectionsAnswerInOrder(t *testing.T) {
	_, c := open(t, t.TempDir())
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			pipe := c.Pipeline()
			cmds := make([]*redis.IntCmd, 50)
			for i := range cmds {
				cmds[i] = pipe.Incr(ctx, fmt.Sprintf("w%d", w))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				errs <- err
				return
			}
			for i, cmd := range cmds {
				if cmd.Val() != int64(i+1) {
					errs <- fmt.Errorf("writer %d: reply %d = %d, want %d", w, i, cmd.Val(), i+1)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A client that sends commands and does not read the replies is
// disconnected once it is owed more than maxPending bytes beyond what its
// socket took, as Redis's client-output-buffer-limit does; meanwhile, and
// after, every other client is served. (Waiting for it instead would hold
// miniredis's lock and stall them all.)
func TestAClientThatDoesNotReadIsDisconnected(t *testing.T) {
	srv, c := open(t, t.TempDir())
	srv.SetMaxPending(64 << 10)
	value := strings.Repeat("v", 4<<10)
	if err := c.Set(ctx, "k", value, 0).Err(); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()

	// 20,000 GETs (440 kB) ask for 80 MB of replies; nothing reads them.
	const n = 20000
	go func() { _, _ = conn.Write(bytes.Repeat([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), n)) }()
	before := srv.Commands()
	for i := range 20 {
		if err := c.Set(ctx, "other", i, 0).Err(); err != nil {
			t.Fatalf("another client, while one does not read: %v", err)
		}
		time.Sleep(25 * time.Millisecond)
	}
	if ran := srv.Commands() - before; ran >= n {
		t.Fatalf("the store ran all %d commands of a client that read none of the replies", ran)
	}

	// The client finds its connection closed after the replies its socket
	// held.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	read, err := io.Copy(io.Discard, conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection that read nothing was not closed (%d bytes came)", read)
	}
	if perReply := int64(len(value) + 8); read >= n*perReply {
		t.Fatalf("all %d replies came (%d bytes)", n, read)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != value {
		t.Fatalf("another client after the disconnect: %v", err)
	}
}

// The limit counts replies held, not one reply's size: a value far larger
// than it is still read whole by a client that reads.
func TestOneReplyLargerThanTheLimitIsSent(t *testing.T) {
	srv, c := open(t, t.TempDir())
	srv.SetMaxPending(64 << 10)
	big := strings.Repeat("b", 1<<20)
	if err := c.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if v, err := c.Get(ctx, "big").Result(); err != nil || v != big {
			t.Fatalf("GET of 1 MiB under a 64 KiB limit: %d bytes, %v", len(v), err)
		}
	}
}
