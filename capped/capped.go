// Package capped serves HTTP on a TCP listener that holds at most a fixed
// number of connections, so that clients that connect and stay (idle
// keep-alives, headers sent a byte at a time) cannot take the file
// descriptors the rest of the process needs, nor keep out the next
// request. The worker's /metrics server and the console use it.
package capped

import (
	"context"
	"log"
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts are an HTTP server's read-header, read, write and idle
// timeouts.
type Timeouts struct{ Header, Read, Write, Idle time.Duration }

// Listener holds at most max connections open at once, so that clients
// that connect and stay (idle keep-alives, headers sent a byte at a time)
// cannot take the file descriptors the deliveries need. At the cap it
// closes the connection that has waited longest without a request being
// served (idle, or still sending its headers) to make room; when every
// connection is serving a request, it stops accepting until one ends, and
// newcomers wait in the kernel's backlog, holding no descriptor of ours.
type Listener struct {
	net.Listener
	slots   chan struct{} // one per open connection
	changed chan struct{} // a connection closed or went idle
	done    chan struct{} // closed by Close
	once    sync.Once

	mu    sync.Mutex
	conns map[*conn]struct{}
}

// Listen listens on addr (TCP) with at most max connections open.
func Listen(addr string, max int) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Listener{Listener: ln, slots: make(chan struct{}, max), changed: make(chan struct{}, 1),
		done: make(chan struct{}), conns: map[*conn]struct{}{}}, nil
}

// Accept waits for a free slot (making one if a connection is idle), then
// accepts.
func (l *Listener) Accept() (net.Conn, error) {
	if err := l.reserve(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	cc := &conn{Conn: c, l: l, since: time.Now()}
	l.mu.Lock()
	l.conns[cc] = struct{}{}
	l.mu.Unlock()
	return cc, nil
}

func (l *Listener) reserve() error {
	for {
		select {
		case l.slots <- struct{}{}:
			return nil
		case <-l.done:
			return net.ErrClosed
		default:
		}
		if v := l.idlest(); v != nil {
			_ = v.Close()
			continue
		}
		select {
		case l.slots <- struct{}{}:
			return nil
		case <-l.changed:
		case <-l.done:
			return net.ErrClosed
		}
	}
}

// idlest is the open connection that has waited longest without serving a
// request, or nil when every one is serving.
func (l *Listener) idlest() *conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v *conn
	for c := range l.conns {
		if c.busy == 0 && (v == nil || c.since.Before(v.since)) {
			v = c
		}
	}
	return v
}

// Close stops accepting; open connections are the server's to close.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Open is how many connections are open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *Listener) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Server is an HTTP server of h on l with timeouts t: it marks each
// connection busy while one of its requests is served.
func (l *Listener) Server(h http.Handler, t Timeouts, errLog *log.Logger) *http.Server {
	return &http.Server{
		ReadHeaderTimeout: t.Header, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle, ErrorLog: errLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, unwrap(c))
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cc, _ := r.Context().Value(connKey{}).(*conn); cc != nil {
				cc.serving(1)
				defer cc.serving(-1)
			}
			h.ServeHTTP(w, r)
		}),
	}
}

type connKey struct{}

// unwrap finds the conn under c (a TLS server wraps it).
func unwrap(c net.Conn) *conn {
	for {
		switch v := c.(type) {
		case *conn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
}

// conn is a connection of a Listener; closing it frees its slot.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
	// busy counts the requests being served (HTTP/2 serves several at
	// once); since is when the connection last became idle. Both under l.mu.
	busy  int
	since time.Time
}

func (c *conn) serving(d int) {
	c.l.mu.Lock()
	c.busy += d
	if c.busy == 0 {
		c.since = time.Now()
	}
	c.l.mu.Unlock()
	if d < 0 {
		c.l.signal()
	}
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.slots
		c.l.signal()
	})
	return err
}
