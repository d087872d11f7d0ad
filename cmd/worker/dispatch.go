package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/egress"
	"github.com/fluxora/webhook-worker/endpoints"
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
// claim and deliver until SIGTERM/SIGINT, then finish the requests in flight.
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
		if errors.Is(err, errListenPooled) {
			return exitUsage
		}
		return exitFailure
	}
	log.Info("worker: stopped cleanly")
	return exitOK
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

func dispatch(ctx context.Context, cfg config, log *slog.Logger) error {
	// On the direct path (pooled.go; the pooled path has neither):
	//
	// synchronous_commit=off on the worker's own writes: they no longer
	// queue for WAL flushes behind (and ahead of) the producers'. A database
	// crash can lose only the last few hundred milliseconds of them; each
	// lost write is atomic (claim, or mark + retry + dead letter), so its
	// rows are pending again (at once, or when their lease expires) and are
	// redelivered, never lost.
	//
	// plan_cache_mode=force_generic_plan: the claim and the outcome write
	// are prepared once per connection and planned once. Left to choose,
	// PostgreSQL keeps re-planning them (their custom plans look cheaper
	// for the values at hand), which costs more than running them; their
	// generic plans stay on the indexes (TestClaimAndRecordUseIndexes).
	pool, path, err := openWorkerPool(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := schema.Check(ctx, pool); err != nil {
		return err
	}
	listenCC, err := listenBase(ctx, cfg)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lst, err := listener.New(listener.Config{
		Connect:    ownConnect(listenCC, "fluxora-webhook-listener"),
		Probe:      notifyProbe(pool),
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		return err
	}
	guard := egress.New(egress.Config{Allow: cfg.EgressAllow, DenyLoopback: !cfg.EgressAllowLoopback, Registerer: reg})
	var envSnd *sender.Sender // nil: no WEBHOOK_URL endpoint
	if cfg.WebhookURL != "" {
		envSnd, err = sender.New(sender.Config{URL: cfg.WebhookURL, Secret: cfg.Secret, Timeout: cfg.Timeout,
			MaxConns: cfg.Concurrency, MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes, Control: guard.Control, Headers: cfg.SignatureHeaders,
			PreviousSecret: cfg.SecretPrevious, PreviousUntil: cfg.SecretPreviousUntil})
		if err != nil {
			return err
		}
		logPreviousSecret(log, cfg, time.Now())
	}
	snd := newHTTPSenders(envSnd, sender.Config{Timeout: cfg.Timeout, MaxConns: min(cfg.EndpointConcurrency, cfg.Concurrency),
		MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes, Control: guard.Control, Headers: cfg.SignatureHeaders})
	defer snd.Close()
	gt, closeGates, err := newGates(cfg, reg, log)
	if err != nil {
		return err
	}
	defer closeGates()
	lease := leaseFor(cfg)
	clm, err := claimer.New(claimer.Config{Pool: pool, BatchSize: cfg.BatchSize, Lease: lease, EnvEndpoint: cfg.WebhookURL != ""})
	if err != nil {
		return err
	}
	hsh, err := listener.NewHush(listener.HushConfig{Connect: ownConnect(listenCC, "fluxora-webhook-hush"), Registerer: reg})
	if err != nil {
		return err
	}
	eps, err := endpoints.New(endpoints.Config{Pool: pool, Registerer: reg, Logger: log})
	if err != nil {
		return err
	}
	var gate dispatcher.Gate // nil: no gates, no call at all
	if cfg.RedisURL != "" {
		gate = endpointGate{gt, cfg.WebhookURL}
	}
	d, err := dispatcher.New(dispatcher.Config{
		Store: store{clm}, Sender: snd, Gate: gate, Hush: hsh, Disabler: goneDisabler{eps}, Wake: lst.Wake(),
		EnvEndpoint: cfg.WebhookURL != "", Registerer: reg, Logger: log,
		BatchSize: cfg.BatchSize, Concurrency: cfg.Concurrency, EndpointConcurrency: cfg.EndpointConcurrency, MaxAttempts: cfg.MaxAttempts,
		PollInterval: cfg.PollInterval, BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, DeferMax: gt.MaxDefer(),
		Rand: rand.Float64, Now: time.Now,
	})
	if err != nil {
		return err
	}

	// work outlives ctx by the shutdown timeout, so that requests in flight
	// at SIGTERM finish and are recorded.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var forced atomic.Bool
	stopTimer := context.AfterFunc(ctx, func() {
		log.Info("worker: stopping; finishing the requests in flight", "shutdown_timeout", cfg.ShutdownTimeout.String())
		time.AfterFunc(cfg.ShutdownTimeout, func() { forced.Store(true); cancelWork() })
	})
	defer stopTimer()

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return lst.Run(gctx) })
	// Never run deaf: nothing is claimed before LISTEN is verified.
	select {
	case <-lst.Ready():
	case <-gctx.Done():
		return listenRefusal(g.Wait())
	}
	g.Go(func() error { return d.Run(gctx, work) })
	g.Go(func() error { return hsh.Run(gctx) })
	g.Go(func() error { return eps.RunJanitor(gctx, endpoints.JanitorEveryDefault, cfg.DisableAfter) })
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
		"endpoint_concurrency", cfg.EndpointConcurrency, "env_endpoint", cfg.WebhookURL != "",
		"lease", lease.String(), "retention", cfg.Retention.String(), "poll_interval", cfg.PollInterval.String(), "max_attempts", cfg.MaxAttempts,
		"gates", gatesSummary(cfg), "database_path", path.String())
	err = g.Wait()
	if forced.Load() {
		return errShutdownTimeout
	}
	return listenRefusal(err)
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
