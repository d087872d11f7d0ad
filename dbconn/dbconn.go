// Package dbconn opens the worker's connections to PostgreSQL: the pool,
// on the direct path or, through PgBouncer in transaction mode, on the
// pooled one (Path; README, "Behind PgBouncer"), and the connections of
// its own outside the pool (the listener's, the hush's). It decides the
// path from what the server does with the direct path's startup
// parameters. It drops every connection to a server that can no longer
// take the worker's writes (a failover, a restart), and opens the
// worker's own only to one that can. No error it returns contains a
// connection string.
package dbconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Path is how the worker's pool reaches PostgreSQL.
type Path int

const (
	// Direct: each connection prepares the claim and the outcome write
	// once (named prepared statements) and plans them once
	// (plan_cache_mode=force_generic_plan); the worker's own commits do
	// not wait for WAL flushes (synchronous_commit=off). Both are startup
	// parameters. Once connected (directSessionSQL), JIT is turned off, and a lock
	// wait gives up after 500 ms (lock_timeout), before PostgreSQL's
	// deadlock check (deadlock_timeout, 1 s by default) would choose whom
	// to refuse, so that a producer waiting on the worker for an ordering
	// key's lane (migration 015) is never the one refused: the worker's
	// statement runs again (outbox's retryMoved).
	Direct Path = iota
	// Pooled: through PgBouncer in transaction mode, where any
	// statement may run on any server connection: no named prepared
	// statement (statement descriptions are cached, statements are sent
	// unnamed, still one round trip), no startup parameter PgBouncer
	// refuses, no session state. The worker's commits are synchronous.
	Pooled
)

// String is the path's name in the start log line: "direct" or "pooled".
func (p Path) String() string {
	if p == Direct {
		return "direct"
	}
	return "pooled"
}

// Config configures the pool Open opens.
type Config struct {
	// DatabaseURL is the pool's connection string (DATABASE_URL).
	// Required.
	DatabaseURL string
	// ListenURL is the connection string of the connections of the
	// worker's own (WEBHOOK_LISTEN_DATABASE_URL): one other than
	// DatabaseURL says DatabaseURL is pooled. Defaults to DatabaseURL.
	ListenURL string
	// Size is the most connections of the pool. Required, positive.
	Size int32
	// Logger receives the warning of a DatabaseURL that refused or ignored
	// the direct path's startup parameters, and each reset of the pool (a
	// server lost to the worker's writes: lost.go). Defaults to
	// discarding.
	Logger *slog.Logger
	// OnLost is called after the pool dropped its connections because a
	// statement found the server read-only, shutting down or gone, so that
	// the worker drops its own connections (the listener's, the hush's)
	// too. It runs on the goroutine of the failed statement and must not
	// block. Optional.
	OnLost func()
	// Registerer receives fluxora_webhook_database_resets_total from Open
	// (OpenPath registers nothing). Optional: nil registers nothing.
	Registerer prometheus.Registerer
}

// directParams are the startup parameters of the direct path.
var directParams = map[string]string{"synchronous_commit": "off", "plan_cache_mode": "force_generic_plan"}

// Open opens the worker's pool to DatabaseURL and says its path. It is
// taken as pooled when ListenURL names another URL (the one reason to set
// it); otherwise as direct, unless the server refuses the direct path's
// startup parameters (PgBouncer's "unsupported startup parameter") or
// ignores them (a PgBouncer with ignore_startup_parameters), which the log
// says.
func Open(ctx context.Context, cfg Config) (*pgxpool.Pool, Path, error) {
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	w := newWatch(cfg, cfg.Registerer)
	if cmp.Or(cfg.ListenURL, cfg.DatabaseURL) != cfg.DatabaseURL {
		pool, err := openPath(ctx, cfg, Pooled, w)
		return pool, Pooled, err
	}
	pool, err := openPath(ctx, cfg, Direct, w)
	switch {
	case err == nil:
		applied, err := directParamsApplied(ctx, pool)
		if err != nil || applied {
			if err != nil {
				pool.Close()
				pool = nil
			}
			return pool, Direct, err
		}
		pool.Close()
		log.Warn("dbconn: DATABASE_URL ignored the startup parameters synchronous_commit and plan_cache_mode (PgBouncer with ignore_startup_parameters?): using the pooled path; a transaction-mode pooler also needs WEBHOOK_LISTEN_DATABASE_URL, a direct connection")
	case isUnsupportedStartupParameter(err):
		log.Warn("dbconn: DATABASE_URL refused the startup parameters synchronous_commit and plan_cache_mode (PgBouncer?): using the pooled path; a transaction-mode pooler also needs WEBHOOK_LISTEN_DATABASE_URL, a direct connection")
	default:
		return nil, Direct, err
	}
	pool, err = openPath(ctx, cfg, Pooled, w)
	return pool, Pooled, err
}

// OpenPath opens a pool to cfg.DatabaseURL on path and checks the server
// answers. The operator commands (and migrate) take the pooled path,
// which works directly and through PgBouncer in transaction mode alike.
// Its pool drops its connections as Open's does (lost.go).
func OpenPath(ctx context.Context, cfg Config, path Path) (*pgxpool.Pool, error) {
	return openPath(ctx, cfg, path, newWatch(cfg, nil))
}

// openPath opens the pool on path, w watching its statements.
func openPath(ctx context.Context, cfg Config, path Path, w *watch) (*pgxpool.Pool, error) {
	pc, err := parsePool(cfg, path)
	if err != nil {
		return nil, err
	}
	pc.ConnConfig.Tracer = w
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	w.pool.Store(pool)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database unreachable: %w", err)
	}
	return pool, nil
}

// parsePool builds the configuration of a pool of cfg.Size connections to
// cfg.DatabaseURL for path.
func parsePool(cfg Config, path Path) (*pgxpool.Config, error) {
	if cfg.Size <= 0 {
		return nil, errors.New("dbconn: Size must be positive")
	}
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, errors.New("DATABASE_URL is not a valid PostgreSQL connection string")
	}
	pc.MaxConns = cfg.Size
	pc.ConnConfig.RuntimeParams["application_name"] = "fluxora-webhook-worker"
	if path == Direct {
		for k, v := range directParams {
			pc.ConnConfig.RuntimeParams[k] = v
		}
		pc.AfterConnect = directSession
	} else {
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	return pc, nil
}

// directSessionSQL sets lock_timeout (see Direct) and turns JIT
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

// isUnsupportedStartupParameter reports PgBouncer's refusal of a startup
// parameter it does not know (one not in its ignore_startup_parameters).
func isUnsupportedStartupParameter(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Message, "unsupported startup parameter")
}

// directParamsAppliedSQL says whether the session runs with the direct
// path's startup parameters.
const directParamsAppliedSQL = `SELECT current_setting('synchronous_commit') = 'off'
		AND current_setting('plan_cache_mode') = 'force_generic_plan'`

// directParamsApplied reports whether the server applied the direct path's
// startup parameters. Simple protocol: no prepared statement is left on a
// server connection a pooler may hand to someone else.
func directParamsApplied(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var ok bool
	err := pool.QueryRow(ctx, directParamsAppliedSQL, pgx.QueryExecModeSimpleProtocol).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("database: check startup parameters: %w", err)
	}
	return ok, nil
}
