// Package respproxy is a TCP proxy for the Redis protocol that loses chosen
// replies: the fault tests put it between the engine and a real Redis to
// prove that a commit whose answer never arrives is neither lost nor done
// twice. It parses both directions (RESP2 and RESP3), so it knows which
// reply answers which command; every command reaches Redis unchanged.
package respproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Command is one command a client sent: its name and arguments.
type Command [][]byte

// Name is the command's name as sent.
func (c Command) Name() string {
	if len(c) == 0 {
		return ""
	}
	return string(c[0])
}

// Fault is what happens to the reply of a command the rule picks.
type Fault int

const (
	// Pass forwards the reply.
	Pass Fault = iota
	// Drop discards the reply and closes the client's connection, as a
	// network that fails after Redis ran the command does.
	Drop
	// Delay holds the reply (Proxy.Delay) and then forwards it, by which
	// time a client with a shorter read timeout has given up on it.
	Delay
)

// Rule decides the fault of each command's reply. It is called once per
// command, in the order a connection sent them, from the connection's own
// goroutine (rules of several connections may run at once).
type Rule func(Command) Fault

// Proxy forwards connections from its listener to Upstream.
type Proxy struct {
	Upstream string
	// Delay is how long a Delay fault holds a reply (default 1s).
	Delay time.Duration

	mu    sync.Mutex
	rule  Rule
	conns map[net.Conn]struct{}
	l     net.Listener
	wg    sync.WaitGroup
}

// Start listens on a loopback port and forwards to upstream until Close.
func Start(upstream string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Upstream: upstream, Delay: time.Second, l: l, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// SetRule replaces the rule (nil passes every reply).
func (p *Proxy) SetRule(r Rule) {
	p.mu.Lock()
	p.rule = r
	p.mu.Unlock()
}

func (p *Proxy) fault(c Command) Fault {
	p.mu.Lock()
	r := p.rule
	p.mu.Unlock()
	if r == nil {
		return Pass
	}
	return r(c)
}

// Close stops listening, closes every connection and waits for their
// goroutines.
func (p *Proxy) Close() error {
	err := p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.Upstream, 5*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(client, server)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(client, server)
		}()
	}
}

// serve pipes one connection. Commands go up as they are read; each
// reply is matched with the oldest command still owed one.
func (p *Proxy) serve(client, server net.Conn) {
	defer p.untrack(client, server)
	faults := make(chan Fault, 1024) // commands sent, replies owed, in order
	up := make(chan struct{})
	go func() {
		defer close(up)
		defer close(faults)
		r := bufio.NewReader(client)
		for {
			raw, cmd, err := readCommand(r)
			if err != nil {
				return
			}
			faults <- p.fault(cmd)
			if _, err := server.Write(raw); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(server)
	for {
		raw, push, err := readReply(r)
		if err != nil {
			break
		}
		if push { // RESP3 push data answers no command
			if _, err := client.Write(raw); err != nil {
				break
			}
			continue
		}
		f, ok := <-faults
		if !ok {
			break
		}
		switch f {
		case Drop:
			_ = client.Close()
			_ = server.Close()
			<-up
			return
		case Delay:
			time.Sleep(p.Delay)
		}
		if _, err := client.Write(raw); err != nil {
			break
		}
	}
	_ = client.Close()
	_ = server.Close()
	<-up
}

// readCommand reads one command: a RESP array of bulk strings, or an
// inline command (a line of words, as redis-cli and telnet send).
func readCommand(r *bufio.Reader) (raw []byte, cmd Command, err error) {
	line, err := readLine(r)
	if err != nil {
		return nil, nil, err
	}
	raw = append(raw, line...)
	if line[0] != '*' {
		for _, w := range splitWords(line[:len(line)-2]) {
			cmd = append(cmd, w)
		}
		return raw, cmd, nil
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil {
		return nil, nil, fmt.Errorf("respproxy: bad array header %q", line)
	}
	for range n {
		h, err := readLine(r)
		if err != nil {
			return nil, nil, err
		}
		if h[0] != '$' {
			return nil, nil, fmt.Errorf("respproxy: command element %q is not a bulk string", h)
		}
		raw = append(raw, h...)
		size, err := strconv.Atoi(string(h[1 : len(h)-2]))
		if err != nil || size < 0 {
			return nil, nil, fmt.Errorf("respproxy: bad bulk header %q", h)
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, nil, err
		}
		raw = append(raw, b...)
		cmd = append(cmd, b[:size])
	}
	return raw, cmd, nil
}

// readReply reads one whole reply and says whether it is a RESP3 push.
func readReply(r *bufio.Reader) (raw []byte, push bool, err error) {
	raw, err = readValue(r, nil)
	return raw, err == nil && len(raw) > 0 && raw[0] == '>', err
}

// readValue appends one RESP2/RESP3 value to raw.
func readValue(r *bufio.Reader, raw []byte) ([]byte, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	raw = append(raw, line...)
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return raw, nil
	case '$', '!', '=': // bulk string, bulk error, verbatim string
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("respproxy: bad length %q", line)
		}
		if n < 0 {
			return raw, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return append(raw, b...), nil
	case '*', '~', '>', '%', '|': // array, set, push, map, attribute
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("respproxy: bad length %q", line)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if raw, err = readValue(r, raw); err != nil {
				return nil, err
			}
		}
		if line[0] == '|' { // an attribute precedes the value it describes
			return readValue(r, raw)
		}
		return raw, nil
	}
	return nil, fmt.Errorf("respproxy: unknown reply type %q", line[0])
}

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errors.New("respproxy: line without CRLF")
	}
	return line, nil
}

func splitWords(b []byte) [][]byte {
	var out [][]byte
	start := -1
	for i, c := range b {
		if c == ' ' || c == '\t' {
			if start >= 0 {
				out = append(out, b[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, b[start:])
	}
	return out
}
