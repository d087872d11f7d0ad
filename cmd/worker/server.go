package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fluxora/webhook-worker/capped"
	"github.com/fluxora/webhook-worker/dbconn"
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
	ln    *capped.Listener
	srv   *http.Server
	ready func(ctx context.Context) error
	log   *slog.Logger
}

func newHealthServer(addr string, gatherer prometheus.Gatherer, ready func(context.Context) error, log *slog.Logger) (*healthServer, error) {
	ln, err := capped.Listen(addr, healthMaxConns)
	if err != nil {
		return nil, err
	}
	h := &healthServer{ln: ln, ready: ready, log: log}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", h.readyz)
	h.srv = ln.Server(mux, capped.Timeouts{Header: healthReadHeaderTimeout, Read: healthReadTimeout,
		Write: healthWriteTimeout, Idle: healthIdleTimeout}, slog.NewLogLogger(log.Handler(), slog.LevelWarn))
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
		switch {
		case errors.Is(err, errListenerDown):
			what = "listener not connected"
		case errors.Is(err, dbconn.ErrReadOnly):
			what = "database read-only"
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
