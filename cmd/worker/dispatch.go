package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fluxora/webhook-worker/dbconn"
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/listener"
	schema "github.com/fluxora/webhook-worker/sql"
)

func newLogger(cfg config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// runDispatcher is `worker` with no command: check the schema, then listen,
// claim and deliver until SIGTERM/SIGINT, then finish the requests in flight.
func runDispatcher(ctx context.Context, getenv func(string) string, stderr io.Writer) int {
	cfg, err := loadConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "worker: configuration:\n%v\n", err)
		return exitUsage
	}
	log := newLogger(cfg, stderr)
	for _, w := range cfg.Trust.Warnings {
		log.Warn("worker: configuration", "warning", w)
	}
	if err := runWorker(ctx, cfg, log); err != nil {
		log.Error("worker: stopped", "error", err)
		return stoppedCode(err)
	}
	log.Info("worker: stopped cleanly")
	return exitOK
}

// runWorker builds the worker, runs it until ctx ends and its requests in
// flight are finished, and releases it.
func runWorker(ctx context.Context, cfg config, log *slog.Logger) error {
	w, err := newWorker(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer w.Close()
	return w.Run(ctx)
}

// stoppedCode is the exit code of a worker stopped by err.
func stoppedCode(err error) int {
	switch {
	case errors.Is(err, schema.ErrNotMigrated):
		return exitSchema
	case errors.Is(err, errListenPooled), errors.Is(err, errSealedUnreadable):
		return exitUsage
	}
	return exitFailure
}

// errListenPooled is the refusal to run deaf; it names the variable.
var errListenPooled = errors.New("WEBHOOK_LISTEN_DATABASE_URL (default DATABASE_URL) must be a direct connection to PostgreSQL, or go through PgBouncer in session mode")

// listenRefusal wraps a deaf listener's error in errListenPooled.
func listenRefusal(err error) error {
	if errors.Is(err, listener.ErrDeaf) {
		return fmt.Errorf("%w: %w", errListenPooled, err)
	}
	return err
}

// errShutdownTimeout reports requests cut short by the shutdown timeout.
var errShutdownTimeout = errors.New("shutdown timeout exceeded: requests in flight were cut short and their rows released for the next worker")

// leaseMargin is what a lease allows beyond the request timeout and the two
// gate calls of an attempt: the time to hand the outcome over and write it.
const leaseMargin = 2 * time.Second

// leaseFor is how long a claim holds its rows: a row is never taken over
// while its attempt may still be running or being recorded, and a dead
// worker's rows are free again this long after their claim.
func leaseFor(cfg config) time.Duration {
	lease := cfg.Timeout + leaseMargin
	if cfg.RedisURL != "" {
		lease += 2 * cfg.GateTimeout
	}
	return lease
}

// poolSize: the claims (one at a time), the outcome writes, the readiness
// ping, retention, and one spare. No connection is held across a request.
const poolSize = 5

// Run listens, then claims and delivers until ctx ends; then it finishes
// the requests in flight, for at most the shutdown timeout. Nothing is
// claimed before LISTEN is verified.
func (w *worker) Run(ctx context.Context) error {
	work, forced, stop := w.drainContext(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.lst.Run(gctx) })
	g.Go(func() error { return w.dropOwn(gctx) })
	// Never run deaf: nothing is claimed before LISTEN is verified.
	select {
	case <-w.lst.Ready():
	case <-gctx.Done():
		return listenRefusal(g.Wait())
	}
	w.prepareHistory(gctx)
	g.Go(func() error { return w.d.Run(gctx, work) })
	g.Go(func() error { return w.hsh.Run(gctx) })
	g.Go(func() error { return w.eps.RunJanitor(gctx, endpoints.JanitorEveryDefault, w.cfg.DisableAfter) })
	g.Go(func() error { return w.ret.Run(gctx) })
	g.Go(func() error { return w.eps.RunClientCerts(gctx) })
	g.Go(func() error { return w.blocked.Run(gctx) })
	g.Go(func() error { return w.catalog.Run(gctx) })
	if err := w.serve(gctx, g); err != nil {
		return err
	}
	w.logStarted()
	err := g.Wait()
	if forced.Load() {
		return errShutdownTimeout
	}
	return listenRefusal(err)
}

// drainContext is the context of the deliveries: it outlives ctx by the
// shutdown timeout, so that requests in flight at SIGTERM finish and are
// recorded; forced is set when the timeout cut them short. stop releases it.
func (w *worker) drainContext(ctx context.Context) (work context.Context, forced *atomic.Bool, stop func()) {
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	forced = new(atomic.Bool)
	stopTimer := context.AfterFunc(ctx, func() {
		w.log.Info("worker: stopping; finishing the requests in flight", "shutdown_timeout", w.cfg.ShutdownTimeout.String())
		time.AfterFunc(w.cfg.ShutdownTimeout, func() { forced.Store(true); cancelWork() })
	})
	return work, forced, func() { stopTimer(); cancelWork() }
}

// serve starts /metrics, /healthz and /readyz on WEBHOOK_METRICS_ADDR
// (none when it is off).
func (w *worker) serve(ctx context.Context, g *errgroup.Group) error {
	if w.cfg.MetricsAddr == "" {
		return nil
	}
	srv, err := newHealthServer(w.cfg.MetricsAddr, w.reg, w.ready, w.log)
	if err != nil {
		return fmt.Errorf("WEBHOOK_METRICS_ADDR: %w", err)
	}
	g.Go(func() error { return srv.Run(ctx) })
	w.log.Info("worker: serving /metrics, /healthz, /readyz", "addr", srv.Addr())
	return nil
}

// ready is /readyz: LISTEN active and the database answering and taking
// writes (not a standby, nor a primary being demoted).
func (w *worker) ready(ctx context.Context) error {
	if !w.lst.Connected() {
		return errListenerDown
	}
	return dbconn.Writable(ctx, w.pool)
}

func (w *worker) logStarted() {
	cfg := w.cfg
	b := readBuildInfo()
	w.log.Info("worker: started", "version", b.Version, "revision", b.Revision, "go", b.GoVersion, "batch_size", cfg.BatchSize, "concurrency", cfg.Concurrency,
		"endpoint_concurrency", cfg.EndpointConcurrency, "env_endpoint", cfg.WebhookURL != "",
		"lease", w.lease.String(), "retention", cfg.Retention.String(), "poll_interval", cfg.PollInterval.String(), "max_attempts", cfg.MaxAttempts,
		"gates", gatesSummary(cfg), "database_path", w.path.String(), "trust", cfg.Trust.String(), "tracing", tracingSummary(cfg))
}

// logPreviousSecret says whether WEBHOOK_SECRET_PREVIOUS still signs, and
// until when; never the secret.
func logPreviousSecret(log *slog.Logger, cfg config, now time.Time) {
	switch {
	case cfg.SecretPrevious == nil:
	case now.Before(cfg.SecretPreviousUntil):
		log.Info("WEBHOOK_SECRET_PREVIOUS signs beside WEBHOOK_SECRET until its grace period ends",
			"until", cfg.SecretPreviousUntil.UTC().Format(time.RFC3339))
	default:
		log.Warn("WEBHOOK_SECRET_PREVIOUS_UNTIL has passed: the previous secret signs nothing; unset both variables",
			"until", cfg.SecretPreviousUntil.UTC().Format(time.RFC3339))
	}
}

// prepareHistory makes history's partitions before the first outcome.
// Without them its rows go to the default partitions (and retention moves
// them later), so a failure is only worth a warning; but a lock not had
// in time (a transaction on the history, a vacuum) is usually gone a
// moment later, so it is tried a few times, a second apart, first.
func (w *worker) prepareHistory(ctx context.Context) {
	const tries = 4
	for try := 1; ; try++ {
		_, err := w.ret.Prepare(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		if try == tries {
			w.log.Warn("worker: history partitions not prepared", "error", err, "tries", tries)
			return
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
