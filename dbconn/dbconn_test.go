package dbconn

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fluxora/webhook-worker/internal/pgbouncer"
	"github.com/fluxora/webhook-worker/internal/testdb"
)

// On a direct connection the worker's sessions plan once (generic plans),
// commit without waiting for the WAL flush, and never JIT-compile: the
// claim's generic plan is estimated over jit_above_cost on a large table,
// and compiling it would cost every claim far more than running it.
func TestDirectSessionsTurnJITOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	pool, path, err := Open(ctx, Config{DatabaseURL: db.URL, ListenURL: db.URL, Size: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if path != Direct {
		t.Fatalf("path %s, want direct", path)
	}
	var jit, plan, commit string
	if err := pool.QueryRow(ctx, "SELECT current_setting('jit'), current_setting('plan_cache_mode'), current_setting('synchronous_commit')").Scan(&jit, &plan, &commit); err != nil {
		t.Fatal(err)
	}
	if jit != "off" || plan != "force_generic_plan" || commit != "off" {
		t.Fatalf("jit %s, plan_cache_mode %s, synchronous_commit %s; want off, force_generic_plan, off", jit, plan, commit)
	}
}

// A ListenURL of its own says DatabaseURL is pooled: no startup parameter
// but application_name, the server's defaults in force.
func TestListenURLOfItsOwnIsPooled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	pool, path, err := Open(ctx, Config{DatabaseURL: db.URL, ListenURL: db.URL + "&application_name=x", Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if path != Pooled {
		t.Fatalf("path %s, want pooled", path)
	}
	if applied, err := directParamsApplied(ctx, pool); err != nil || applied {
		t.Fatalf("the pooled path's session runs with the direct parameters (%v, %v)", applied, err)
	}
}

// PgBouncer's refusal of a startup parameter it does not know is told
// apart from any other error.
func TestUnsupportedStartupParameter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Severity: "FATAL", Code: "08P01", Message: "unsupported startup parameter: plan_cache_mode"}, true},
		{fmt.Errorf("database: %w", &pgconn.PgError{Message: "unsupported startup parameter: synchronous_commit"}), true},
		{&pgconn.PgError{Code: "28P01", Message: "password authentication failed"}, false},
		{fmt.Errorf("unsupported startup parameter: not a server's error"), false},
	} {
		if got := isUnsupportedStartupParameter(tc.err); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A connection string that does not parse is named by its variable, never
// quoted (it may hold a password).
func TestBadURLsAreNotQuoted(t *testing.T) {
	t.Parallel()
	const bad = "postgres://app:s3cretpw@db:notaport/app"
	if _, err := OpenPath(context.Background(), Config{DatabaseURL: bad, Size: 1}, Pooled); err == nil ||
		!strings.Contains(err.Error(), "DATABASE_URL") || strings.Contains(err.Error(), "s3cretpw") {
		t.Errorf("DATABASE_URL: %v", err)
	}
	if _, err := ListenBase(context.Background(), bad); err == nil ||
		!strings.Contains(err.Error(), "WEBHOOK_LISTEN_DATABASE_URL") || strings.Contains(err.Error(), "s3cretpw") {
		t.Errorf("WEBHOOK_LISTEN_DATABASE_URL: %v", err)
	}
}

// Behind PgBouncer, DATABASE_URL alone takes the pooled path, whether
// PgBouncer refuses the direct path's startup parameters or ignores them,
// and the log says which: the pool then runs with the server's defaults.
func TestPgBouncerTakesThePooledPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		settings []string
		log      string
	}{
		{"refused", nil, "refused the startup parameters"},
		{"ignored", []string{"ignore_startup_parameters = synchronous_commit,plan_cache_mode"}, "ignored the startup parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t)
			bounced := pgbouncer.Start(t, db.URL, tc.settings...).URL()
			var logs bytes.Buffer
			pool, path, err := Open(ctx, Config{DatabaseURL: bounced, Size: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if path != Pooled || !strings.Contains(logs.String(), tc.log) || !strings.Contains(logs.String(), "WEBHOOK_LISTEN_DATABASE_URL") {
				t.Fatalf("path %s, log:\n%s", path, logs.String())
			}
			if applied, err := directParamsApplied(ctx, pool); err != nil || applied {
				t.Fatalf("the pooled path's session runs with the direct parameters (%v, %v)", applied, err)
			}
		})
	}
}
