// Package faultproxy is a TCP proxy for tests that stands in for a network
// partition between one client and its store: put it in front of one
// connection's server address, then blackhole or delay the traffic that
// crosses it. It listens on 127.0.0.1 only.
//
// Blackhole models a partition the way a client sees one: the connections
// stay open, but no byte crosses in either direction (bytes already read
// from one side are held, not dropped, as TCP would retransmit them), and
// new connections are accepted but carry nothing. Heal lets the held and
// later bytes through again. Reset closes every proxied connection (a
// partition long enough for TCP to give up). Nothing here sleeps to
// synchronise: a pump blocks on the gate until it opens.
//
// A Proxy is safe for concurrent use.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from its own 127.0.0.1 address to a
// target address, through a gate that tests open and close.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	open    chan struct{} // closed while traffic flows; replaced by Blackhole
	holed   bool
	delay   time.Duration
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	closing chan struct{}
}

// New starts a proxy to target (host:port) on a free 127.0.0.1 port.
// Traffic flows until Blackhole is called. It returns the listener's error.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{
		target:  target,
		ln:      ln,
		open:    open,
		conns:   map[net.Conn]struct{}{},
		closing: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (127.0.0.1:port): give it to the client in
// place of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Blackhole stops all traffic in both directions, on open and new
// connections, until Heal. Idempotent.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.holed {
		p.holed = true
		p.open = make(chan struct{})
	}
}

// Heal lets traffic flow again, held bytes first. Idempotent.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holed {
		p.holed = false
		close(p.open)
	}
}

// Blackholed reports whether traffic is stopped.
func (p *Proxy) Blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holed
}

// SetDelay delays every chunk of bytes, in both directions, by d before
// forwarding it (0 removes the delay).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Reset closes every connection open through the proxy; clients see their
// connections drop and dial again (through the proxy, still subject to
// Blackhole).
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Close stops the proxy: the listener and every connection are closed and
// its goroutines end before Close returns. Idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// track registers c, and reports false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	if !p.wait() {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(server) {
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { p.pump(server, client); done <- struct{}{} }()
	go func() { p.pump(client, server); done <- struct{}{} }()
	<-done
	// One side ended: close both so the other pump ends too.
	_ = client.Close()
	_ = server.Close()
	<-done
}

// pump copies src to dst through the gate.
func (p *Proxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

// wait blocks while traffic is stopped, then applies the delay. It reports
// false once the proxy is closed.
func (p *Proxy) wait() bool {
	for {
		p.mu.Lock()
		open, delay := p.open, p.delay
		p.mu.Unlock()
		select {
		case <-open:
		case <-p.closing:
			return false
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-p.closing:
				t.Stop()
				return false
			}
		}
		// Blackhole may have been called during the delay.
		p.mu.Lock()
		holed := p.holed
		p.mu.Unlock()
		if !holed {
			return true
		}
	}
}
