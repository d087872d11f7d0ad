package testdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	schema "github.com/fluxora/webhook-worker/sql"
)

// The template: New clones one migrated database per schema version instead
// of migrating each test's database. Test binaries of many packages run at
// once against one server, so the template is built by one process under a
// session advisory lock (buildLockKey, on the admin connection), into
// <name>_build, and renamed to its name only when complete: a template
// under its name is always whole, and a crashed build leaves only a
// _build database that the next builder drops. It is built with
// ALLOW_CONNECTIONS false so that no session can sit in it and make
// CREATE DATABASE ... TEMPLATE fail with "source database is being accessed
// by other users" (SQLSTATE 55006), which is still retried briefly.
//
// Templates stay on the server for the next run. Each process that clones
// one stamps its comment with the time (usedComment), and a builder drops
// templates of other schema versions unused for staleAfter, so worktrees on
// different versions testing at once do not drop each other's.
const (
	templatePrefix = "fluxora_tmpl_"
	buildSuffix    = "_build"
	buildLockKey   = 0x666c75786f7261_74 // "fluxora" + 't'
	usedComment    = "fluxora test template, last used "
	staleAfter     = time.Hour
)

// Cloning is retried on 55006 every cloneRetryMin, doubling up to
// cloneRetryMax, for at most cloneRetryFor.
const (
	cloneRetryMin = 10 * time.Millisecond
	cloneRetryMax = 500 * time.Millisecond
	cloneRetryFor = 20 * time.Second
)

var tmpl struct {
	sync.Mutex
	name string // built (or found) by this process; "" before
}

// TemplateName is the template database for the embedded schema:
// fluxora_tmpl_ and the first 12 hex digits of a SHA-256 over every
// migration and trigger file's name and checksum.
func TemplateName() (string, error) {
	files, err := schema.Files()
	if err != nil {
		return "", fmt.Errorf("schema files: %w", err)
	}
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%s\x00", f.Version, f.Checksum)
	}
	return templatePrefix + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// template returns the name of the migrated template, building it if no
// process has. With stale set, the name this process knew is forgotten
// first (the template was dropped under it).
func template(ctx context.Context, admin *pgx.Conn, stale bool) (string, error) {
	tmpl.Lock()
	defer tmpl.Unlock()
	if stale {
		tmpl.name = ""
	}
	if tmpl.name != "" {
		return tmpl.name, nil
	}
	name, err := TemplateName()
	if err != nil {
		return "", err
	}
	if err := ensureTemplate(ctx, admin, name); err != nil {
		return "", err
	}
	// Best effort: a failed stamp only makes the template look older.
	_, _ = admin.Exec(ctx, fmt.Sprintf("COMMENT ON DATABASE %s IS '%s%s'", name, usedComment, time.Now().UTC().Format(time.RFC3339)))
	tmpl.name = name
	return name, nil
}

// ensureTemplate builds name unless it exists, under the build lock.
func ensureTemplate(ctx context.Context, admin *pgx.Conn, name string) error {
	if ok, err := exists(ctx, admin, name); err != nil || ok {
		return err
	}
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(buildLockKey)); err != nil {
		return fmt.Errorf("template lock: %w", err)
	}
	defer func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(buildLockKey))
	}()
	if ok, err := exists(ctx, admin, name); err != nil || ok {
		return err // built by another process while this one waited
	}
	if err := build(ctx, admin, name); err != nil {
		return fmt.Errorf("build template %s: %w", name, err)
	}
	keep := []string{name}
	if current, err := TemplateName(); err == nil {
		keep = append(keep, current)
	}
	_ = dropStale(ctx, admin, templatePrefix, keep) // best effort: the template is built
	return nil
}

func exists(ctx context.Context, admin *pgx.Conn, name string) (bool, error) {
	var ok bool
	err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("template lookup: %w", err)
	}
	return ok, nil
}

// build migrates <name>_build, closes every connection to it, and renames
// it to name. The caller holds the build lock.
func build(ctx context.Context, admin *pgx.Conn, name string) error {
	tmp := name + buildSuffix
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+tmp); err != nil {
		return fmt.Errorf("drop a crashed build: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+tmp); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, urlFor(tmp))
	if err != nil {
		return err
	}
	_, err = schema.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+tmp+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return err
	}
	// The pool's server processes may still be exiting: 55006 until then.
	return retryInUse(ctx, func() error {
		_, err := admin.Exec(ctx, "ALTER DATABASE "+tmp+" RENAME TO "+name)
		return err
	})
}

// dropStale drops the databases named with prefix (templatePrefix, or a
// test's own) other than keep that no session uses
// and no process has cloned for staleAfter, and crashed builds. A database
// it cannot drop is left for the next builder.
func dropStale(ctx context.Context, admin *pgx.Conn, prefix string, keep []string) error {
	rows, err := admin.Query(ctx, `SELECT d.datname FROM pg_database d
		WHERE starts_with(d.datname, $1::text) AND d.datname <> ALL($2::text[])
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datid = d.oid)
		  AND (right(d.datname, length($3::text)) = $3::text
		       OR coalesce(substr(shobj_description(d.oid, 'pg_database'), length($4::text) + 1), '') < $5::text)`,
		prefix, keep, buildSuffix, usedComment, time.Now().Add(-staleAfter).UTC().Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("list stale templates: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list stale templates: %w", err)
	}
	// A clone under way holds a lock on its template: do not wait for it.
	if _, err := admin.Exec(ctx, "SET lock_timeout = '1s'"); err != nil {
		return err
	}
	defer func() { _, _ = admin.Exec(context.WithoutCancel(ctx), "RESET lock_timeout") }()
	for _, n := range names {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+n)
	}
	return nil
}

// clone creates name from the template, building the template first if need
// be, and again if it was dropped meanwhile (SQLSTATE 3D000).
func clone(ctx context.Context, admin *pgx.Conn, name string) error {
	for attempt := 0; ; attempt++ {
		from, err := template(ctx, admin, attempt > 0)
		if err != nil {
			return err
		}
		err = retryInUse(ctx, func() error {
			_, err := admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE "+from)
			return err
		})
		if attempt == 0 && pgCode(err) == "3D000" {
			continue
		}
		return err
	}
}

// retryInUse runs f again, with a bounded backoff, while it fails because
// another session is connected to the database it needs alone (55006).
func retryInUse(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(cloneRetryFor)
	for delay := cloneRetryMin; ; delay = min(2*delay, cloneRetryMax) {
		err := f()
		if pgCode(err) != "55006" || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
	}
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
