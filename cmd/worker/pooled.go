package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/listener"
)

// poolPath is how the worker's pool reaches PostgreSQL (README, "Behind
// PgBouncer").
type poolPath int

const (
	// directPath: each connection prepares the claim and the outcome write
	// once (named prepared statements) and plans them once
	// (plan_cache_mode=force_generic_plan); the worker's own commits do
	// not wait for WAL flushes (synchronous_commit=off). Both are startup
	// parameters. Once connected (directSessionSQL), JIT is turned off, and a lock
	// wait gives up after 500 ms (lock_timeout), before PostgreSQL's
	// deadlock check (deadlock_timeout, 1 s by default) would choose whom
	// to refuse, so that a producer waiting on the worker for an ordering
	// key's lane (migration 015) is never the one refused: the worker's
	// statement runs again (outbox's retryMoved).
	directPath poolPath = iota
	// pooledPath: through PgBouncer in transaction mode, where any
	// statement may run on any server connection: no named prepared
	// statement (statement descriptions are cached, statements are sent
	// unnamed, still one round trip), no startup parameter PgBouncer
	// refuses, no session state. The worker's commits are synchronous.
	pooledPath
)

func (p poolPath) String() string {
	if p == directPath {
		return "direct"
	}
	return "pooled"
}

// directParams are the startup parameters of the direct path.
var directParams = map[string]string{"synchronous_commit": "off", "plan_cache_mode": "force_generic_plan"}

// parsePool builds the configuration of a pool of size connections to
// DATABASE_URL for path. Errors never contain the connection string.
func parsePool(cfg config, size int32, path poolPath) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, errors.New("DATABASE_URL is not a valid PostgreSQL connection string")
	}
	pc.MaxConns = size
	pc.ConnConfig.RuntimeParams["application_name"] = "fluxora-webhook-worker"
	if path == directPath {
		for k, v := range directParams {
			pc.ConnConfig.RuntimeParams[k] = v
		}
		pc.AfterConnect = directSession
	} else {
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	return pc, nil
}

// directSessionSQL sets lock_timeout (see directPath) and turns JIT
// compilation off for a direct session (one whose startup parameters were
// applied, so not a pooler's shared connection):
// the claim's generic plan is estimated well over jit_above_cost on a large
// table, and compiling it costs every claim far more than the statement
// itself runs. The worker's statements are short and many; JIT never pays
// for them.
const directSessionSQL = `SELECT set_config('jit', 'off', false), set_config('lock_timeout', '500ms', false)
WHERE current_setting('plan_cache_mode') = 'force_generic_plan'`

func directSession(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, directSessionSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("database: turn JIT off: %w", err)
	}
	return nil
}

// connectPool opens the pool and checks the server answers.
func connectPool(ctx context.Context, pc *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database unreachable: %w", err)
	}
	return pool, nil
}

// openWorkerPool opens the dispatcher's pool. DATABASE_URL is taken as
// pooled when WEBHOOK_LISTEN_DATABASE_URL names another URL (the one
// reason to set it); otherwise as direct, unless the server refuses the
// direct path's startup parameters (PgBouncer's "unsupported startup
// parameter") or ignores them (a PgBouncer with ignore_startup_parameters),
// which the log says.
func openWorkerPool(ctx context.Context, cfg config, log *slog.Logger) (*pgxpool.Pool, poolPath, error) {
	if cfg.ListenURL != cfg.DatabaseURL {
		pool, err := openPath(ctx, cfg, pooledPath)
		return pool, pooledPath, err
	}
	pool, err := openPath(ctx, cfg, directPath)
	switch {
	case err == nil:
		applied, err := directParamsApplied(ctx, pool)
		if err != nil || applied {
			if err != nil {
				pool.Close()
				pool = nil
			}
			return pool, directPath, err
		}
		pool.Close()
		log.Warn("worker: DATABASE_URL ignored the startup parameters synchronous_commit and plan_cache_mode (PgBouncer with ignore_startup_parameters?): using the pooled path; a transaction-mode pooler also needs WEBHOOK_LISTEN_DATABASE_URL, a direct connection")
	case isUnsupportedStartupParameter(err):
		log.Warn("worker: DATABASE_URL refused the startup parameters synchronous_commit and plan_cache_mode (PgBouncer?): using the pooled path; a transaction-mode pooler also needs WEBHOOK_LISTEN_DATABASE_URL, a direct connection")
	default:
		return nil, directPath, err
	}
	pool, err = openPath(ctx, cfg, pooledPath)
	return pool, pooledPath, err
}

func openPath(ctx context.Context, cfg config, path poolPath) (*pgxpool.Pool, error) {
	pc, err := parsePool(cfg, poolSize, path)
	if err != nil {
		return nil, err
	}
	return connectPool(ctx, pc)
}

// isUnsupportedStartupParameter reports PgBouncer's refusal of a startup
// parameter it does not know (one not in its ignore_startup_parameters).
func isUnsupportedStartupParameter(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Message, "unsupported startup parameter")
}

// directParamsApplied reports whether the server applied the direct path's
// startup parameters. Simple protocol: no prepared statement is left on a
// server connection a pooler may hand to someone else.
func directParamsApplied(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var ok bool
	err := pool.QueryRow(ctx, `SELECT current_setting('synchronous_commit') = 'off'
		AND current_setting('plan_cache_mode') = 'force_generic_plan'`, pgx.QueryExecModeSimpleProtocol).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("database: check startup parameters: %w", err)
	}
	return ok, nil
}

// listenBase is the base of the listener's and the hush's own
// connections: WEBHOOK_LISTEN_DATABASE_URL (default DATABASE_URL), parsed
// and checked to answer, so that a wrong one fails the start.
func listenBase(ctx context.Context, cfg config) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(cfg.ListenURL)
	if err != nil {
		return nil, errors.New("WEBHOOK_LISTEN_DATABASE_URL is not a valid PostgreSQL connection string")
	}
	conn, err := ownConnect(cc, "fluxora-webhook-listener")(ctx)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOK_LISTEN_DATABASE_URL: database unreachable: %w", err)
	}
	_ = conn.Close(ctx)
	return cc, nil
}

// notifyProbe is the listener's Probe: a NOTIFY through the pool.
func notifyProbe(pool *pgxpool.Pool) func(context.Context, string) error {
	return func(ctx context.Context, channel string) error {
		_, err := pool.Exec(ctx, "SELECT pg_notify($1, '')", channel)
		return err
	}
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
