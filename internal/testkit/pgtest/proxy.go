package pgtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections on loopback to a PostgreSQL server, and
// can cut the network in between without touching the server (which the
// tests beside this one share): Cut holds every connection, open and new,
// with nothing passing either way, as a network partition does; Heal
// resets the held connections and forwards again.
type Proxy struct {
	Addr   string // host:port the proxy listens on
	target string
	l      net.Listener

	mu    sync.Mutex
	cut   bool
	pairs map[net.Conn]net.Conn // client side -> server side (nil while held)
}

// NewProxy starts a proxy to the server of url u (its host and port),
// closed when the test ends.
func NewProxy(t testing.TB, u string) *Proxy {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: pu.Host, l: l, pairs: map[net.Conn]net.Conn{}}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL returns u with its host and port replaced by the proxy's.
func (p *Proxy) URL(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	pu.Host = p.Addr
	return pu.String()
}

// Cut stops every byte: the open connections' server sides are closed
// (the server sees its client gone, as after a keepalive timeout) while
// their client sides stay open and silent, and new connections are
// accepted and held the same way.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c, s := range p.pairs {
		if s != nil {
			s.Close()
			p.pairs[c] = nil
		}
	}
}

// Heal resets the held connections (their clients see them fail at
// once) and forwards new ones again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for c, s := range p.pairs {
		if s == nil {
			c.Close()
			delete(p.pairs, c)
		}
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

// serve forwards c to the server, or holds it while the network is cut.
func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.pairs[c] = nil
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		s.Close()
		p.pairs[c] = nil
		p.mu.Unlock()
		return
	}
	p.pairs[c] = s
	p.mu.Unlock()
	go func() {
		io.Copy(s, c) //nolint:errcheck // ends with either side
		s.Close()
	}()
	io.Copy(c, s) //nolint:errcheck // ends with either side
	p.mu.Lock()
	defer p.mu.Unlock()
	if held, ok := p.pairs[c]; ok && held == nil {
		return // cut: the client side stays open and silent until Heal
	}
	c.Close()
	delete(p.pairs, c)
}

func (p *Proxy) close() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, s := range p.pairs {
		c.Close()
		if s != nil {
			s.Close()
		}
	}
	clear(p.pairs)
}
