package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/listener"
	"github.com/fluxora/webhook-worker/retention"
	"github.com/fluxora/webhook-worker/sender"
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
// claim and deliver until SIGTERM/SIGINT, then drain the batches in flight.
func runDispatcher(ctx context.Context, getenv func(string) string, stderr io.Writer) int {
	cfg, err := loadConfig(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "worker: configuration:\n%v\n", err)
		return exitUsage
	}
	log := newLogger(cfg, stderr)
	if err := dispatch(ctx, cfg, log); err != nil {
		log.Error("worker: stopped", "error", err)
		if errors.Is(err, schema.ErrNotMigrated) {
			return exitSchema
		}
		return exitFailure
	}
	log.Info("worker: stopped cleanly")
	return exitOK
}

// errShutdownTimeout reports batches aborted by the shutdown timeout.
var errShutdownTimeout = errors.New("shutdown timeout exceeded: in-flight batches were aborted and their rows stay pending")

func dispatch(ctx context.Context, cfg config, log *slog.Logger) error {
	maxBatches := (cfg.Concurrency+cfg.BatchSize-1)/cfg.BatchSize + 1
	// The claim transaction waits on HTTP: make sure the server's
	// idle_in_transaction_session_timeout cannot end it first.
	idle := strconv.FormatInt(max(2*cfg.Timeout, cfg.Timeout+30*time.Second).Milliseconds(), 10)
	// synchronous_commit=off on the worker's own transactions: they no
	// longer queue for WAL flushes behind (and ahead of) the producers'. A
	// database crash can lose only the last few hundred milliseconds of
	// recorded outcomes; each lost transaction is atomic (mark + retry +
	// dead letter), so its rows are pending again and are redelivered, never
	// lost.
	pool, err := openPool(ctx, cfg, int32(maxBatches+2),
		"idle_in_transaction_session_timeout", idle, "synchronous_commit", "off")
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.Check(ctx, pool); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lst, err := listener.New(listener.Config{
		Connect:    ownConnect(pool.Config().ConnConfig, "fluxora-webhook-listener"),
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		return err
	}
	snd, err := sender.New(sender.Config{URL: cfg.WebhookURL, Secret: cfg.Secret, Timeout: cfg.Timeout, MaxConns: cfg.Concurrency})
	if err != nil {
		return err
	}
	defer snd.Close()
	gt, closeGates, err := newGates(cfg, reg, log)
	if err != nil {
		return err
	}
	defer closeGates()
	clm, err := claimer.New(claimer.Config{Pool: pool, BatchSize: cfg.BatchSize})
	if err != nil {
		return err
	}
	hsh, err := listener.NewHush(listener.HushConfig{Connect: ownConnect(pool.Config().ConnConfig, "fluxora-webhook-hush"), Registerer: reg})
	if err != nil {
		return err
	}
	d := newDispatcher(dispatcherConfig{
		Claimer: clm, Sender: snd, Gate: gt, Hush: hsh, Wake: lst.Wake(), URL: cfg.WebhookURL,
		BatchSize: cfg.BatchSize, Concurrency: cfg.Concurrency, MaxBatches: maxBatches, MaxAttempts: cfg.MaxAttempts,
		PollInterval: cfg.PollInterval, BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax,
		Rand: rand.Float64, Now: time.Now, Logger: log, Metrics: newMetrics(reg),
	})

	// work outlives ctx by the shutdown timeout, so that batches in flight
	// at SIGTERM finish and commit.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var forced atomic.Bool
	stopTimer := context.AfterFunc(ctx, func() {
		log.Info("worker: stopping; finishing the batches in flight", "shutdown_timeout", cfg.ShutdownTimeout.String())
		time.AfterFunc(cfg.ShutdownTimeout, func() { forced.Store(true); cancelWork() })
	})
	defer stopTimer()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return lst.Run(gctx) })
	g.Go(func() error { return d.Run(gctx, work) })
	g.Go(func() error { return hsh.Run(gctx) })
	if cfg.Retention > 0 {
		ret, err := retention.New(retention.Config{Pool: pool, Retention: cfg.Retention, Logger: log, Registerer: reg})
		if err != nil {
			return err
		}
		g.Go(func() error { return ret.Run(gctx) })
	}
	if cfg.MetricsAddr != "" {
		srv, err := newHealthServer(cfg.MetricsAddr, reg, func(ctx context.Context) error {
			if !lst.Connected() {
				return errors.New("listener not connected")
			}
			return pool.Ping(ctx)
		})
		if err != nil {
			return fmt.Errorf("WEBHOOK_METRICS_ADDR: %w", err)
		}
		g.Go(func() error { return srv.Run(gctx) })
		log.Info("worker: serving /metrics, /healthz, /readyz", "addr", srv.Addr())
	}
	log.Info("worker: started", "batch_size", cfg.BatchSize, "concurrency", cfg.Concurrency,
		"max_batches", maxBatches, "retention", cfg.Retention.String(), "poll_interval", cfg.PollInterval.String(), "max_attempts", cfg.MaxAttempts,
		"gates", gatesSummary(cfg))
	err = g.Wait()
	if forced.Load() {
		return errShutdownTimeout
	}
	return err
}

// ownConnect opens a connection outside the pool (the listener's, the
// hush's) with TCP keepalives, so that a dead peer is noticed in about 20s.
func ownConnect(base *pgx.ConnConfig, applicationName string) func(context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		cc := base.Copy()
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3,
		}}
		cc.DialFunc = d.DialContext
		cc.RuntimeParams["application_name"] = applicationName
		return pgx.ConnectConfig(ctx, cc)
	}
}

func gatesSummary(cfg config) string {
	if cfg.RedisURL == "" {
		return "off (REDIS_URL unset)"
	}
	if cfg.BreakerThreshold == 0 {
		return fmt.Sprintf("rate limit %d retries/s; circuit breaker off", cfg.RetryRPS)
	}
	return fmt.Sprintf("rate limit %d retries/s; circuit breaker after %d failures for %s",
		cfg.RetryRPS, cfg.BreakerThreshold, cfg.BreakerReset)
}

// newGates builds the Redis gates; without REDIS_URL they allow everything.
func newGates(cfg config, reg prometheus.Registerer, log *slog.Logger) (*gates.Gates, func(), error) {
	gc := gates.Config{
		RetryRPS: cfg.RetryRPS, BreakerThreshold: cfg.BreakerThreshold, BreakerReset: cfg.BreakerReset,
		ProbeTTL: 2*cfg.Timeout + 5*time.Second, CallTimeout: cfg.GateTimeout, Registerer: reg, Logger: log,
	}
	closeFn := func() {}
	if cfg.RedisURL != "" {
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, nil, errors.New("REDIS_URL is not a valid redis URL")
		}
		boundRedisCalls(opt, cfg.GateTimeout)
		client := redis.NewClient(opt)
		gc.Client = client
		closeFn = func() { _ = client.Close() }
	}
	g, err := gates.New(gc)
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return g, closeFn, nil
}

// boundRedisCalls makes every Redis call give up within timeout, whatever
// state the server is in: go-redis ignores a context deadline on the socket
// unless ContextTimeoutEnabled is set, so a paused (not down) Redis would
// otherwise hold each call for its 3 s read timeout, retried 3 times. A
// failed call fails open, so retrying it buys nothing. A dial is bounded by
// the call's context too.
func boundRedisCalls(opt *redis.Options, timeout time.Duration) {
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1 // a refused dial fails the call at once
	opt.ReadTimeout = timeout
	opt.WriteTimeout = timeout
	opt.PoolTimeout = timeout
}
