package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/fluxora/webhook-worker/dbconn"
	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/egress"
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/listener"
	"github.com/fluxora/webhook-worker/ordering"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/retention"
	"github.com/fluxora/webhook-worker/sealed"
	"github.com/fluxora/webhook-worker/sender"
	schema "github.com/fluxora/webhook-worker/sql"
	"github.com/fluxora/webhook-worker/tracing"
)

// worker is the dispatcher and the parts that run beside it (listener,
// hush, endpoint janitor, retention, health server), wired from a config:
// newWorker builds it, Run runs it, Close releases it.
type worker struct {
	cfg   config
	log   *slog.Logger
	reg   *prometheus.Registry
	lease time.Duration

	pool *pgxpool.Pool
	path dbconn.Path
	lst  *listener.Listener
	hsh  *listener.Hush
	// eps is the endpoints' janitor, their client certificates (read
	// again while it runs) and the watch of the secrets the worker
	// cannot open.
	eps *endpoints.Store
	d   *dispatcher.Dispatcher
	ret *retention.Deleter // history's partitions; WEBHOOK_RETENTION=0 keeps them
	// blocked sets the blocked ordering keys' gauges while it runs.
	blocked *ordering.Blocked
	// tracer makes the attempts' spans; nil when tracing is off.
	tracer trace.Tracer
	// lost is signalled when the pool dropped its connections to a server
	// that can no longer take writes (dbconn.Config.OnLost): Run then
	// drops the listener's and the hush's (dropOwn).
	lost chan struct{}

	closers []func() // run by Close, last first
}

// newWorker connects to PostgreSQL (the pool, then one listen connection
// to check WEBHOOK_LISTEN_DATABASE_URL), checks the schema and builds
// every part; nothing runs until Run. On error, what was opened is closed.
func newWorker(ctx context.Context, cfg config, log *slog.Logger) (*worker, error) {
	w := &worker{cfg: cfg, log: log, reg: prometheus.NewRegistry(), lease: leaseFor(cfg), lost: make(chan struct{}, 1)}
	w.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	readBuildInfo().register(w.reg)
	if err := w.build(ctx); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Close closes the gates' Redis client, the senders' idle connections and
// the pool.
func (w *worker) Close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
}

func (w *worker) build(ctx context.Context) error {
	if err := w.startTracing(); err != nil {
		return err
	}
	listenCC, err := w.openDatabase(ctx)
	if err != nil {
		return err
	}
	w.lst, err = listener.New(listener.Config{
		Connect: dbconn.Connect(listenCC, "fluxora-webhook-listener"), Probe: dbconn.NotifyProbe(w.pool), Logger: w.log, Registerer: w.reg,
	})
	if err != nil {
		return err
	}
	if err := w.openCredentials(ctx); err != nil {
		return err
	}
	snd, err := w.senders()
	if err != nil {
		return err
	}
	gt, closeGates, err := newGates(w.cfg, w.reg, w.log)
	if err != nil {
		return err
	}
	w.closers = append(w.closers, closeGates)
	if w.hsh, err = listener.NewHush(listener.HushConfig{Connect: dbconn.Connect(listenCC, "fluxora-webhook-hush"), Registerer: w.reg}); err != nil {
		return err
	}
	if err := w.newDispatcher(snd, gt); err != nil {
		return err
	}
	w.ret, err = retention.New(retention.Config{Pool: w.pool, Retention: w.cfg.Retention, Logger: w.log, Registerer: w.reg})
	return err
}

// openDatabase opens the pool, checks the schema, and returns the base of
// the listener's and the hush's own connections.
//
// On the direct path (package dbconn; the pooled path has neither):
//
// synchronous_commit=off on the worker's own writes: they no longer queue
// for WAL flushes behind (and ahead of) the producers'. A database crash can
// lose only the last few hundred milliseconds of them; each lost write is
// atomic (claim, or mark + retry + dead letter), so its rows are pending
// again (at once, or when their lease expires) and are redelivered, never
// lost.
//
// plan_cache_mode=force_generic_plan: the claim and the outcome write are
// prepared once per connection and planned once. Left to choose, PostgreSQL
// keeps re-planning them (their custom plans look cheaper for the values at
// hand), which costs more than running them; their generic plans stay on
// the indexes (TestClaimAndRecordUseIndexes).
func (w *worker) openDatabase(ctx context.Context) (*pgx.ConnConfig, error) {
	pool, path, err := dbconn.Open(ctx, dbconn.Config{DatabaseURL: w.cfg.DatabaseURL, ListenURL: w.cfg.ListenURL,
		Size: poolSize, Logger: w.log, Registerer: w.reg, OnLost: w.signalLost})
	if err != nil {
		return nil, err
	}
	w.pool, w.path = pool, path
	w.closers = append(w.closers, pool.Close)
	if err := schema.Check(ctx, pool); err != nil {
		return nil, err
	}
	return dbconn.ListenBase(ctx, w.cfg.ListenURL)
}

// signalLost is the pool's OnLost: it tells dropOwn, without waiting.
func (w *worker) signalLost() {
	select {
	case w.lost <- struct{}{}:
	default:
	}
}

// dropOwn drops the listener's and the hush's connections whenever the
// pool dropped its own to a server that can no longer take writes (a
// failover: the listener would otherwise LISTEN on a node no producer
// writes to), until ctx ends. It returns nil.
func (w *worker) dropOwn(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.lost:
			w.lst.Drop()
			w.hsh.Drop()
		}
	}
}

// openCredentials opens every stored credential (a worker that cannot
// refuses to start: errSealedUnreadable), builds the endpoints' store and
// the blocked keys' gauges, and loads the client certificates.
func (w *worker) openCredentials(ctx context.Context) error {
	store, err := outbox.New(w.pool)
	if err != nil {
		return err
	}
	if err := checkCredentials(ctx, store, w.cfg.Trust.Keys, w.log); err != nil {
		return err
	}
	w.eps, err = endpoints.New(endpoints.Config{Pool: w.pool, Registerer: w.reg, Logger: w.log, Sealer: keyringSealer{w.cfg.Trust.Keys},
		ConsoleURL: w.cfg.ConsoleURL})
	if err != nil {
		return err
	}
	if w.blocked, err = ordering.New(ordering.Config{Store: store, Registerer: w.reg, Logger: w.log}); err != nil {
		return err
	}
	return w.eps.LoadClientCerts(ctx)
}

// senders builds the WEBHOOK_URL endpoint's sender (if any) and the cache
// of the table endpoints' senders, all behind the egress guard.
func (w *worker) senders() (*sender.PerEndpoint, error) {
	cfg := w.cfg
	guard := egress.New(egress.Config{Allow: cfg.EgressAllow, DenyLoopback: !cfg.EgressAllowLoopback, Registerer: w.reg})
	var envSnd *sender.Sender // nil: no WEBHOOK_URL endpoint
	if cfg.WebhookURL != "" {
		var err error
		envSnd, err = sender.New(sender.Config{URL: cfg.WebhookURL, Secret: cfg.Secret, Timeout: cfg.Timeout,
			MaxConns: cfg.Concurrency, MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes, Control: guard.Control, Headers: cfg.SignatureHeaders,
			PreviousSecret: cfg.SecretPrevious, PreviousUntil: cfg.SecretPreviousUntil, Proxy: cfg.Trust.EgressProxy, RootCAs: cfg.Trust.RootCAs})
		if err != nil {
			return nil, err
		}
		logPreviousSecret(w.log, cfg, time.Now())
	}
	keys := cfg.Trust.Keys
	// An endpoint's limit grows to every slot (dispatcher/limits.go): its
	// connections must too, or the requests above them wait in the
	// transport, their attempt's time running.
	snd, err := sender.NewPerEndpoint(sender.PerEndpointConfig{Env: envSnd, EnvName: dispatcher.DefaultEndpointName,
		Base: sender.Config{Timeout: cfg.Timeout, MaxConns: cfg.Concurrency,
			MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes, Control: guard.Control, Headers: cfg.SignatureHeaders,
			Proxy: cfg.Trust.EgressProxy, RootCAs: cfg.Trust.RootCAs},
		OpenSecret:        func(id, stored string) ([]byte, error) { return keys.Open(stored, sealed.EndpointSecret(id)) },
		ClientCertificate: w.eps.ClientCertificate, Secrets: w.eps, Tracer: w.tracer})
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, snd.Close)
	return snd, nil
}

// newDispatcher wires the store (its claims and outcome writes), the
// senders, the gates (none without REDIS_URL: no call at all), the hush
// and the endpoints into the dispatcher.
func (w *worker) newDispatcher(snd *sender.PerEndpoint, gt *gates.Gates) error {
	cfg := w.cfg
	store, err := outbox.New(w.pool)
	if err != nil {
		return err
	}
	store.SetConsoleURL(cfg.ConsoleURL)
	var gate dispatcher.Gate
	if cfg.RedisURL != "" {
		gate = endpointGate{gt, cfg.WebhookURL}
	}
	w.d, err = dispatcher.New(dispatcher.Config{
		Store: store, Sender: snd, Gate: gate, Hush: w.hsh, Disabler: goneDisabler{w.eps}, Wake: w.lst.Wake(),
		EnvEndpoint: cfg.WebhookURL != "", EnvFlow: cfg.EnvFlow, Registerer: w.reg, Logger: w.log,
		BatchSize: cfg.BatchSize, Lease: w.lease, Concurrency: cfg.Concurrency, EndpointConcurrency: cfg.EndpointConcurrency,
		MaxAttempts:  cfg.MaxAttempts,
		PollInterval: cfg.PollInterval, BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, DeferMax: gt.MaxDefer(),
		Rand: rand.Float64, Now: time.Now,
	})
	return err
}

// traceFlushTimeout bounds the export of the spans still queued when the
// worker stops (after its requests in flight are done): what is not out
// by then is dropped and counted.
const traceFlushTimeout = 5 * time.Second

// startTracing builds the tracer provider when tracing is on; Close
// exports what is queued, for at most traceFlushTimeout.
func (w *worker) startTracing() error {
	if !w.cfg.TracingOn {
		return nil
	}
	cfg := w.cfg.Tracing
	cfg.Registerer, cfg.Logger, cfg.ServiceVersion = w.reg, w.log, readBuildInfo().Version
	p, err := tracing.New(cfg)
	if err != nil {
		return err
	}
	w.tracer = p.Tracer()
	w.closers = append(w.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			w.log.Warn("worker: spans not all exported at shutdown", "error", err)
		}
	})
	return nil
}
