// Package schema holds the worker's SQL (sql/migrations and sql/triggers,
// embedded) and applies it: Migrate brings a database up to date,
// idempotently; Check tells the dispatcher whether it may start.
//
// Migrations run once each, in file-name order, each in its own transaction,
// and are recorded in webhook_schema_migrations. Trigger files are
// CREATE OR REPLACE scripts: Migrate re-applies one whenever its checksum
// differs from the recorded one, so upgrading a trigger is just
// `worker migrate`.
package schema

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql triggers/*.sql
var files embed.FS

// lockKey is the advisory lock that serialises concurrent `worker migrate`s.
// It is transaction-scoped (pg_advisory_xact_lock), taken by each migration's
// own transaction, so that Migrate works through PgBouncer in transaction
// mode too, where a session lock would stay behind on whichever server
// connection took it.
const lockKey = 0x666c75786f7261 // "fluxora"

const lockSQL = "SELECT pg_advisory_xact_lock($1)"

const createVersionTable = `CREATE TABLE IF NOT EXISTS webhook_schema_migrations (
    version    text        PRIMARY KEY,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// triggerLockSQL runs before a trigger script: replacing a trigger of the
// partitioned webhook_outbox (DROP TRIGGER) locks its partitions before the
// table, while a producer's insert locks the table, then its partition; a
// producer inserting meanwhile could deadlock with it. Taking the table's
// lock first keeps one order. Like the migrations (003), it gives up after
// 200 ms rather than queue producers behind a long transaction, and
// applyRetrying tries again.
const triggerLockSQL = `SET LOCAL lock_timeout = '200ms'; LOCK TABLE webhook_outbox IN ACCESS EXCLUSIVE MODE`

// ErrNotMigrated is returned by Check when the database lacks a migration or
// a current trigger. Its message names `worker migrate`.
var ErrNotMigrated = errors.New("database schema is not up to date: run `worker migrate`")

// File is one embedded SQL script.
type File struct {
	Version  string // path below sql/, e.g. "migrations/001_outbox.sql"
	SQL      string
	Checksum string // lowercase hex SHA-256 of SQL
	Trigger  bool   // re-applied when its checksum changes
}

// Files returns every migration (in order) followed by every trigger script.
func Files() ([]File, error) {
	var out []File
	for _, dir := range []string{"migrations", "triggers"} {
		names, err := fs.Glob(files, dir+"/*.sql")
		if err != nil {
			return nil, err
		}
		sort.Strings(names)
		for _, name := range names {
			b, err := files.ReadFile(name)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(b)
			out = append(out, File{Version: name, SQL: string(b), Checksum: hex.EncodeToString(sum[:]), Trigger: dir == "triggers"})
		}
	}
	return out, nil
}

// Migrate applies every pending migration and every changed trigger script,
// each in its own transaction, and returns the versions it applied. It is
// safe to run concurrently and repeatedly: each transaction takes the lock,
// then checks again whether its script is still to be applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	all, err := Files()
	if err != nil {
		return nil, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Release()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, int64(lockKey)); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, createVersionTable); err != nil {
			return fmt.Errorf("migrate: version table: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	applied, err := recorded(ctx, conn.Conn())
	if err != nil {
		return nil, err
	}
	var done []string
	for _, f := range all {
		if upToDate(applied, f) {
			continue
		}
		did, err := applyRetrying(ctx, conn.Conn(), f)
		if err != nil {
			return done, err
		}
		if did {
			done = append(done, f.Version)
		}
	}
	return done, nil
}

// upToDate: a migration once applied, a trigger script at its checksum.
func upToDate(applied map[string]string, f File) bool {
	sum, ok := applied[f.Version]
	return ok && (sum == f.Checksum || !f.Trigger)
}

// A migration that sets a short lock_timeout (003) gives up rather than
// queue, and block producers, behind a long transaction; it is tried again
// every lockRetryDelay for up to lockRetryFor.
const (
	lockRetryDelay = 300 * time.Millisecond
	lockRetryFor   = 2 * time.Minute
)

// applyRetrying applies f unless another Migrate has meanwhile, trying
// again while it fails for want of a lock (SQLSTATE 55P03). It reports
// whether it applied f.
func applyRetrying(ctx context.Context, conn *pgx.Conn, f File) (bool, error) {
	deadline := time.Now().Add(lockRetryFor)
	for {
		did, err := apply(ctx, conn, f)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			return did, err
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%w (long transactions kept it from a brief table lock for %s: workers of the previous version with slow requests? run it again)", err, lockRetryFor)
		}
		t := time.NewTimer(lockRetryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("migrate %s: %w", f.Version, ctx.Err())
		case <-t.C:
		}
	}
}

// apply runs f and records it in one transaction, under the lock, unless it
// is already up to date.
func apply(ctx context.Context, conn *pgx.Conn, f File) (bool, error) {
	did := false
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, int64(lockKey)); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		var sum string
		err := tx.QueryRow(ctx, "SELECT checksum FROM webhook_schema_migrations WHERE version = $1", f.Version).Scan(&sum)
		switch {
		case err == nil && upToDate(map[string]string{f.Version: sum}, f):
			return nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("migrate %s: read its version: %w", f.Version, err)
		}
		if f.Trigger {
			if _, err := tx.Exec(ctx, triggerLockSQL); err != nil {
				return fmt.Errorf("migrate %s: lock webhook_outbox: %w", f.Version, err)
			}
		}
		if _, err := tx.Exec(ctx, f.SQL); err != nil {
			return fmt.Errorf("migrate %s: %w", f.Version, err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO webhook_schema_migrations (version, checksum) VALUES ($1, $2)
			ON CONFLICT (version) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()`, f.Version, f.Checksum)
		if err != nil {
			return fmt.Errorf("migrate %s: record: %w", f.Version, err)
		}
		did = true
		return nil
	})
	return did && err == nil, err
}

func recorded(ctx context.Context, conn *pgx.Conn) (map[string]string, error) {
	rows, err := conn.Query(ctx, "SELECT version, checksum FROM webhook_schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	out := map[string]string{}
	var v, sum string
	_, err = pgx.ForEachRow(rows, []any{&v, &sum}, func() error { out[v] = sum; return nil })
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	return out, nil
}

// Check returns nil when every migration is applied and every trigger is
// current, and an error wrapping ErrNotMigrated that lists what is missing
// otherwise.
func Check(ctx context.Context, pool *pgxpool.Pool) error {
	all, err := Files()
	if err != nil {
		return err
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('webhook_schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if !exists {
		return fmt.Errorf("%w (no webhook_schema_migrations table)", ErrNotMigrated)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	defer conn.Release()
	applied, err := recorded(ctx, conn.Conn())
	if err != nil {
		return err
	}
	newer := newerRelease(all, applied)
	var missing []string
	for _, f := range all {
		if sum, ok := applied[f.Version]; !ok || (f.Trigger && sum != f.Checksum && !newer) {
			missing = append(missing, path.Base(f.Version))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (missing or outdated: %s)", ErrNotMigrated, strings.Join(missing, ", "))
	}
	return nil
}

// newerRelease says whether the database holds a migration this binary does
// not know: a newer release has migrated it, during a rolling upgrade, and
// its trigger scripts are that release's. A worker of the older release
// still runs there (every migration it knows is applied, and migrations
// are written to let older workers deliver), so that one restarted
// mid-upgrade is not refused for a trigger newer than its own.
func newerRelease(all []File, applied map[string]string) bool {
	known := map[string]bool{}
	for _, f := range all {
		known[f.Version] = true
	}
	for v := range applied {
		if strings.HasPrefix(v, "migrations/") && !known[v] {
			return true
		}
	}
	return false
}
