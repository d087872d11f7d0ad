package main

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Limits of the worker's health server (/metrics, /healthz, /readyz). Its
// clients are a scraper or two and the probes of an orchestrator: a few
// connections at once, each asking a small question.
const (
	healthMaxConns          = 64
	healthReadHeaderTimeout = 5 * time.Second
	healthReadTimeout       = 10 * time.Second
	healthWriteTimeout      = 30 * time.Second
	healthIdleTimeout       = time.Minute
)

// errListenerDown is /readyz's verdict while LISTEN is not active.
var errListenerDown = errors.New("listener not connected")

// healthServer serves /metrics, /healthz and /readyz.
type healthServer struct {
	ln    *capListener
	srv   *http.Server
	ready func(ctx context.Context) error
	log   *slog.Logger
}

func newHealthServer(addr string, gatherer prometheus.Gatherer, ready func(context.Context) error, log *slog.Logger) (*healthServer, error) {
	ln, err := listenCapped(addr, healthMaxConns)
	if err != nil {
		return nil, err
	}
	h := &healthServer{ln: ln, ready: ready, log: log}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", h.readyz)
	h.srv = ln.server(mux, serverTimeouts{header: healthReadHeaderTimeout, read: healthReadTimeout,
		write: healthWriteTimeout, idle: healthIdleTimeout}, slog.NewLogLogger(log.Handler(), slog.LevelWarn))
	return h, nil
}

// Addr is the address actually listened on (useful with port 0).
func (h *healthServer) Addr() string { return h.ln.Addr().String() }

// readyz answers what is wrong in a few words: anyone who can reach the
// port may ask, so the database's user, name, host and port (which a
// connection error quotes) go to the log only.
func (h *healthServer) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.ready(ctx); err != nil {
		what := "database unreachable"
		if errors.Is(err, errListenerDown) {
			what = "listener not connected"
		}
		h.log.Warn("worker: /readyz: not ready", "reason", what, "error", err)
		http.Error(w, "not ready: "+what, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// Run serves until ctx ends.
func (h *healthServer) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = h.srv.Shutdown(sctx)
	})
	defer stop()
	if err := h.srv.Serve(h.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// serverTimeouts are an HTTP server's read-header, read, write and idle
// timeouts.
type serverTimeouts struct{ header, read, write, idle time.Duration }

// capListener holds at most max connections open at once, so that clients
// that connect and stay (idle keep-alives, headers sent a byte at a time)
// cannot take the file descriptors the deliveries need. At the cap it
// closes the connection that has waited longest without a request being
// served (idle, or still sending its headers) to make room; when every
// connection is serving a request, it stops accepting until one ends, and
// newcomers wait in the kernel's backlog, holding no descriptor of ours.
type capListener struct {
	net.Listener
	slots   chan struct{} // one per open connection
	changed chan struct{} // a connection closed or went idle
	done    chan struct{} // closed by Close
	once    sync.Once

	mu    sync.Mutex
	conns map[*cappedConn]struct{}
}

// listenCapped listens on addr (TCP) with at most max connections open.
func listenCapped(addr string, max int) (*capListener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &capListener{Listener: ln, slots: make(chan struct{}, max), changed: make(chan struct{}, 1),
		done: make(chan struct{}), conns: map[*cappedConn]struct{}{}}, nil
}

// Accept waits for a free slot (making one if a connection is idle), then
// accepts.
func (l *capListener) Accept() (net.Conn, error) {
	if err := l.reserve(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	cc := &cappedConn{Conn: c, l: l, since: time.Now()}
	l.mu.Lock()
	l.conns[cc] = struct{}{}
	l.mu.Unlock()
	return cc, nil
}

func (l *capListener) reserve() error {
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
func (l *capListener) idlest() *cappedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var v *cappedConn
	for c := range l.conns {
		if c.busy == 0 && (v == nil || c.since.Before(v.since)) {
			v = c
		}
	}
	return v
}

// Close stops accepting; open connections are the server's to close.
func (l *capListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// open is how many connections are open (for tests).
func (l *capListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *capListener) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// server is an HTTP server of h on l with timeouts t: it marks each
// connection busy while one of its requests is served.
func (l *capListener) server(h http.Handler, t serverTimeouts, errLog *log.Logger) *http.Server {
	return &http.Server{
		ReadHeaderTimeout: t.header, ReadTimeout: t.read, WriteTimeout: t.write, IdleTimeout: t.idle, ErrorLog: errLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, cappedConnKey{}, unwrapCapped(c))
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cc, _ := r.Context().Value(cappedConnKey{}).(*cappedConn); cc != nil {
				cc.serving(1)
				defer cc.serving(-1)
			}
			h.ServeHTTP(w, r)
		}),
	}
}

type cappedConnKey struct{}

// unwrapCapped finds the cappedConn under c (a TLS server wraps it).
func unwrapCapped(c net.Conn) *cappedConn {
	for {
		switch v := c.(type) {
		case *cappedConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
}

// cappedConn is a connection of a capListener; closing it frees its slot.
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
	// busy counts the requests being served (HTTP/2 serves several at
	// once); since is when the connection last became idle. Both under l.mu.
	busy  int
	since time.Time
}

func (c *cappedConn) serving(d int) {
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

func (c *cappedConn) Close() error {
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
