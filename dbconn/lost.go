package dbconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrReadOnly says the server the worker reached takes no writes: a
// standby, a primary being demoted, or default_transaction_read_only on.
var ErrReadOnly = errors.New("dbconn: the database takes no writes (read-only: a standby, or a primary being demoted?)")

// Why a connection's server is lost to the worker's writes (lost), the
// values of fluxora_webhook_database_resets_total's reason.
const (
	lostReadOnly   = "read_only"       // 25006 read_only_sql_transaction
	lostShutdown   = "shutdown"        // 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now
	lostConnection = "connection_lost" // the connection broke under a statement
)

// lost says why err shows that the server can no longer take the
// worker's writes, or "" when it does not: it turned read-only
// (lostReadOnly) or is shutting down, crashing or starting up
// (lostShutdown). A failover shows as one of these, or as connections
// that break (lostConnection, which only the pool's watch can tell, from
// the connection the error closed).
func lost(err error) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	switch pgErr.Code {
	case "25006":
		return lostReadOnly
	case "57P01", "57P02", "57P03":
		return lostShutdown
	}
	return ""
}

// watch is the pool's pgx tracer: it sees the error of every statement
// the pool runs, and when one says the server is lost (lost, or a
// connection broken under it), it drops every connection of the pool
// (pgxpool's Reset: the idle ones at once, those in use when given back),
// counts it, and calls onLost, so that the worker drops its own
// connections too. New connections then go where DATABASE_URL leads now
// (its hosts tried in order, target_session_attrs=read-write skipping a
// standby): a pool never keeps writing to a node that cannot take writes.
// Every reset is acted on: each is a statement that failed, at most one
// per claim's retry, and the connections it drops are few.
type watch struct {
	pool    atomic.Pointer[pgxpool.Pool]
	onLost  func()
	log     *slog.Logger
	metrics *metrics
}

// newWatch builds the watch of cfg's pool; reg nil leaves its counter
// unregistered.
func newWatch(cfg Config, reg prometheus.Registerer) *watch {
	return &watch{onLost: cfg.OnLost, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)), metrics: newMetrics(reg)}
}

var (
	_ pgx.QueryTracer = (*watch)(nil)
	_ pgx.BatchTracer = (*watch)(nil)
)

func (w *watch) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (w *watch) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	w.observe(ctx, conn, data.Err)
}

func (w *watch) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (w *watch) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (w *watch) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	w.observe(ctx, conn, data.Err)
}

// observe acts on a statement's error. A statement cut short by its own
// context (a shutdown, a timeout) closes its connection too, but says
// nothing of the server.
func (w *watch) observe(ctx context.Context, conn *pgx.Conn, err error) {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	reason := lost(err)
	if reason == "" && conn.IsClosed() {
		reason = lostConnection
	}
	if reason == "" {
		return
	}
	if p := w.pool.Load(); p != nil {
		p.Reset()
	}
	w.metrics.resets.WithLabelValues(reason).Inc()
	w.log.Warn("dbconn: the database cannot take the worker's writes (a failover or a restart?): dropping every connection to it",
		"reason", reason, "error", err)
	if w.onLost != nil {
		w.onLost()
	}
}

// writableSQL says whether a transaction of the session may write.
const writableSQL = `SELECT current_setting('transaction_read_only') = 'off'`

// Writable returns nil when the pool's server answers and takes writes,
// ErrReadOnly when it answers read-only, or the error that kept it from
// answering: the worker's readiness.
func Writable(ctx context.Context, pool *pgxpool.Pool) error {
	var ok bool
	if err := pool.QueryRow(ctx, writableSQL).Scan(&ok); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if !ok {
		return ErrReadOnly
	}
	return nil
}
