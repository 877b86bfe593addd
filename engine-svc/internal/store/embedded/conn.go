package embedded

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// The embedded store's own listener. miniredis serves each connection in
// one goroutine and flushes after every command, so a write whose reply
// waited for its fsync inside the command held the whole connection: a
// pipeline of eight commits took eight fsyncs one after another. Instead
// the replies wait at the socket. A connection's writes go to a
// durableConn, which holds the bytes until every journal record appended
// before them is on disk, then sends them; meanwhile miniredis goes on
// with the next command of the pipeline. One fsync and one write then
// cover as many replies as arrived while the last fsync ran.
//
// The rule is Redis's with appendfsync always: no reply leaves before
// every write that ran before it is durable. It holds for read replies
// too, so no client reads a write that a crash could still take back.

// maxPending bounds the reply bytes a connection holds beyond what its
// socket took (Server.maxPending, which tests lower), plus the one reply
// being written. A client past it is disconnected, as Redis's
// client-output-buffer-limit does: it does not read its replies, and
// neither growing the store's memory nor waiting for it is right
// (miniredis writes a reply with its own lock held, so a wait would stall
// every connection).
const maxPending = 16 << 20

// keepBuffer is the largest send buffer a connection keeps between
// sends.
const keepBuffer = 64 << 10

// closeDrain bounds how long a closed connection spends sending the
// replies it held (after their fsync).
const closeDrain = time.Second

// errConnClosed is what a write to a closed connection returns.
var errConnClosed = errors.New("embedded: connection closed")

// serve accepts connections on l and hands each, wrapped, to miniredis.
// It returns when l is closed.
func (s *Server) serve(l net.Listener) {
	defer close(s.acceptDone)
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("embedded store stopped accepting connections", "err", err)
			}
			return
		}
		s.srv.ServeConn(s.durable(c))
	}
}

// durableConn is a net.Conn whose writes are sent only once the journal
// records appended before them are on disk (see above). Its sender
// goroutine belongs to the Server, which waits for it in Close.
type durableConn struct {
	net.Conn
	s *Server

	mu      sync.Mutex
	cond    sync.Cond
	pending []byte
	barrier int64 // the last record pending's bytes wait for
	closing bool  // Close was called: send what is held, then stop
	err     error // set once the connection is unusable
}

// durable wraps c and starts its sender.
func (s *Server) durable(c net.Conn) *durableConn {
	d := &durableConn{Conn: c, s: s}
	d.cond.L = &d.mu
	s.senders.Add(1)
	go d.send()
	return d
}

// Write holds b until what was appended before it is durable.
func (d *durableConn) Write(b []byte) (int, error) {
	seq := d.s.written.Load() // b holds replies of writes appended by now
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return 0, d.err
	}
	if d.closing {
		return 0, errConnClosed
	}
	// Only bytes already held count, so one reply of any size (a large
	// value read whole) still goes to a client that reads it.
	if limit := d.s.maxPending.Load(); int64(len(d.pending)) >= limit {
		d.err = fmt.Errorf("embedded: a client left more than %d bytes of replies unread; its connection is closed", limit)
		d.s.log.Warn("embedded store closed a connection that does not read its replies", "remote", d.Conn.RemoteAddr().String(), "limit_bytes", limit)
		d.pending = nil
		_ = d.Conn.Close() // the reader and the sender stop on it
		d.cond.Broadcast()
		return 0, d.err
	}
	d.pending = append(d.pending, b...)
	d.barrier = max(d.barrier, seq)
	d.cond.Broadcast()
	return len(b), nil
}

// Close asks the sender to send what it holds and close the socket. It
// does not wait: miniredis calls it with its own lock held, which a
// command between its write and its journal record may be waiting for.
func (d *durableConn) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return nil
	}
	d.closing = true
	_ = d.Conn.SetWriteDeadline(time.Now().Add(closeDrain))
	d.cond.Broadcast()
	return nil
}

// send is the connection's sender: it takes all the bytes held, waits for
// their records' fsync (shared with every other waiter) and writes them
// in one call. A failed fsync or write closes the socket with nothing
// more sent: none of the held replies was acknowledged.
func (d *durableConn) send() {
	defer d.s.senders.Done()
	defer func() { _ = d.Conn.Close() }()
	var out []byte
	for {
		d.mu.Lock()
		for len(d.pending) == 0 && !d.closing && d.err == nil {
			d.cond.Wait()
		}
		if d.err != nil || len(d.pending) == 0 { // dropped, or closing with nothing left
			if d.err == nil {
				d.err = errConnClosed
			}
			d.mu.Unlock()
			return
		}
		out, d.pending = d.pending, out[:0]
		barrier := d.barrier
		d.mu.Unlock()

		err := d.s.waitDurable(barrier)
		if err == nil {
			_, err = d.Conn.Write(out)
		}
		if cap(out) > keepBuffer {
			out = nil // a large reply's buffer is not kept for the connection's life
		}
		if err != nil {
			d.mu.Lock()
			d.err = fmt.Errorf("embedded: connection dropped: %w", err)
			d.pending = nil
			d.mu.Unlock()
			return
		}
	}
}

// waitDurable is waitSynced with a lock-free answer when seq is already
// on disk.
func (s *Server) waitDurable(seq int64) error {
	if seq <= s.synced.Load() {
		return nil
	}
	return s.waitSynced(seq)
}
