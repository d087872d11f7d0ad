// Package refusingproxy is a test harness: an HTTP proxy on loopback that
// records the target of every request it is sent (a CONNECT's host:port,
// or a plain request's Host) and answers 403, so that a test can see what
// a client asked of its proxy without any traffic leaving the machine.
package refusingproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// Proxy records and refuses; it never connects anywhere.
type Proxy struct {
	ln      net.Listener
	mu      sync.Mutex
	targets []string
	wg      sync.WaitGroup
}

// New starts a proxy on 127.0.0.1; the test's end stops it.
func New(t testing.TB) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// URL is the proxy's http:// URL.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Seen is every request asked so far, as "METHOD host", oldest first.
func (p *Proxy) Seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

func (p *Proxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		p.mu.Lock()
		p.targets = append(p.targets, req.Method+" "+req.Host)
		p.mu.Unlock()
		_, _ = io.Copy(io.Discard, req.Body)
		if _, err := io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"); err != nil {
			return
		}
	}
}
