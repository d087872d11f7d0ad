package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fluxora/webhook-worker/internal/waitfor"
	schema "github.com/fluxora/webhook-worker/sql"
)

func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	admin, err := pgx.Connect(t.Context(), AdminURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	return admin
}

// scratchName is a database name of this test's own, dropped at its end.
func scratchName(t *testing.T, prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	t.Cleanup(func() { drop(t, name); drop(t, name+buildSuffix) })
	return name
}

func datallowconn(t *testing.T, admin *pgx.Conn, name string) (exists, allow bool) {
	t.Helper()
	err := admin.QueryRow(t.Context(), "SELECT datallowconn FROM pg_database WHERE datname = $1", name).Scan(&allow)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false
	}
	if err != nil {
		t.Fatalf("pg_database: %v", err)
	}
	return true, allow
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("ClonesAMigratedTemplate", func(t *testing.T) {
		t.Parallel()
		New(t) // the template is built by now
		var start time.Time
		if err := adminConn(t).QueryRow(t.Context(), "SELECT now()").Scan(&start); err != nil {
			t.Fatal(err)
		}
		db := New(t)
		var applied time.Time
		if err := db.Pool.QueryRow(t.Context(), "SELECT max(applied_at) FROM webhook_schema_migrations").Scan(&applied); err != nil {
			t.Fatal(err)
		}
		if !applied.Before(start) {
			t.Fatalf("migrated at %v, after New began (%v): not a clone", applied, start)
		}
		if err := schema.Check(t.Context(), db.Pool); err != nil {
			t.Fatalf("check: %v", err)
		}
		if did, err := schema.Migrate(t.Context(), db.Pool); err != nil || len(did) != 0 {
			t.Fatalf("migrate again = %v, %v; want nothing to do", did, err)
		}
		name, err := TemplateName()
		if err != nil {
			t.Fatal(err)
		}
		ok, allow := datallowconn(t, adminConn(t), name)
		if !ok || allow {
			t.Fatalf("template %s: exists %v, allows connections %v; want a closed template", name, ok, allow)
		}
		if _, allow := datallowconn(t, adminConn(t), db.Name); !allow {
			t.Fatalf("the clone refuses connections")
		}
	})

	t.Run("NewEmptyIsEmpty", func(t *testing.T) {
		t.Parallel()
		db := NewEmpty(t)
		if n := db.Count(t, "SELECT count(*) FROM pg_tables WHERE tablename = 'webhook_outbox'"); n != 0 {
			t.Fatalf("NewEmpty has the outbox table")
		}
	})
}

func TestEnsureTemplate(t *testing.T) {
	t.Parallel()

	t.Run("ReplacesACrashedBuild", func(t *testing.T) {
		t.Parallel()
		admin := adminConn(t)
		name := scratchName(t, "fluxora_test_t")
		// A build that died half-way: created, one table in.
		if _, err := admin.Exec(t.Context(), "CREATE DATABASE "+name+buildSuffix); err != nil {
			t.Fatal(err)
		}
		half, err := pgx.Connect(t.Context(), urlFor(name+buildSuffix))
		if err != nil {
			t.Fatal(err)
		}
		_, err = half.Exec(t.Context(), "CREATE TABLE webhook_outbox (id bigint)")
		half.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := ensureTemplate(t.Context(), admin, name); err != nil {
			t.Fatalf("ensure: %v", err)
		}
		if ok, _ := datallowconn(t, admin, name+buildSuffix); ok {
			t.Fatalf("the crashed build is still there")
		}
		clone := scratchName(t, "fluxora_test_")
		if _, err := admin.Exec(t.Context(), "CREATE DATABASE "+clone+" TEMPLATE "+name); err != nil {
			t.Fatalf("clone: %v", err)
		}
		checkMigrated(t, clone)
	})

	t.Run("ConcurrentBuildersBuildOnce", func(t *testing.T) {
		t.Parallel()
		name := scratchName(t, "fluxora_test_t")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			admin := adminConn(t)
			wg.Go(func() { errs[i] = ensureTemplate(t.Context(), admin, name) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("ensure: %v", err)
		}
		if ok, allow := datallowconn(t, adminConn(t), name); !ok || allow {
			t.Fatalf("template: exists %v, allows connections %v", ok, allow)
		}
	})
}

func checkMigrated(t *testing.T, name string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), urlFor(name))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM webhook_schema_migrations").Scan(&n); err != nil {
		t.Fatalf("clone: %v", err)
	}
	files, _ := schema.Files()
	if n != len(files) {
		t.Fatalf("clone has %d of %d schema files recorded", n, len(files))
	}
}

// A session on the template makes CREATE DATABASE ... TEMPLATE fail (55006)
// until it leaves: the clone waits for it.
func TestRetryInUse(t *testing.T) {
	t.Parallel()
	admin := adminConn(t)
	src := scratchName(t, "fluxora_test_")
	if _, err := admin.Exec(t.Context(), "CREATE DATABASE "+src); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(t.Context(), urlFor(src))
	if err != nil {
		t.Fatal(err)
	}
	dst := scratchName(t, "fluxora_test_")
	var busy atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- retryInUse(t.Context(), func() error {
			_, err := admin.Exec(t.Context(), "CREATE DATABASE "+dst+" TEMPLATE "+src)
			if pgCode(err) == "55006" {
				busy.Add(1)
			}
			return err
		})
	}()
	// PostgreSQL itself waits 5s for the session to leave before it fails.
	waitfor.True(t, 30*time.Second, "a clone refused for the session", func() bool { return busy.Load() >= 1 })
	holder.Close(t.Context())
	if err := <-done; err != nil {
		t.Fatalf("clone: %v", err)
	}
}

func TestRetryInUseGivesUpOnOtherErrors(t *testing.T) {
	t.Parallel()
	tries := 0
	err := retryInUse(t.Context(), func() error { tries++; return &pgconn.PgError{Code: "42P04"} })
	if pgCode(err) != "42P04" || tries != 1 {
		t.Fatalf("got %v after %d tries; want 42P04 at once", err, tries)
	}
}

// dropStaleTestPrefix names TestDropStale's databases: not templatePrefix,
// so that a real builder's dropStale (another package's test process, or
// TestEnsureTemplate here) never drops them while the test runs.
const dropStaleTestPrefix = "fluxora_tmplzz_"

func TestDropStale(t *testing.T) {
	t.Parallel()
	admin := adminConn(t)
	mk := func(suffix, comment string) string {
		name := scratchName(t, dropStaleTestPrefix) + suffix
		t.Cleanup(func() { drop(t, name) })
		if _, err := admin.Exec(t.Context(), "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		if comment != "" {
			if _, err := admin.Exec(t.Context(), fmt.Sprintf("COMMENT ON DATABASE %s IS '%s'", name, comment)); err != nil {
				t.Fatal(err)
			}
		}
		return name
	}
	old := usedComment + time.Now().Add(-2*staleAfter).UTC().Format(time.RFC3339)
	recent := usedComment + time.Now().UTC().Format(time.RFC3339)
	unstamped, stale, crashed := mk("", ""), mk("", old), mk(buildSuffix, "")
	fresh, busy, kept := mk("", recent), mk("", old), mk("", old)
	other := scratchName(t, "fluxora_test_")
	if _, err := admin.Exec(t.Context(), "CREATE DATABASE "+other); err != nil {
		t.Fatal(err)
	}
	session, err := pgx.Connect(t.Context(), urlFor(busy))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(context.Background())

	if err := dropStale(t.Context(), admin, dropStaleTestPrefix, []string{kept}); err != nil {
		t.Fatal(err)
	}

	for name, want := range map[string]bool{unstamped: false, stale: false, crashed: false,
		fresh: true, busy: true, kept: true, other: true} {
		if ok, _ := datallowconn(t, admin, name); ok != want {
			t.Errorf("%s: exists %v, want %v", name, ok, want)
		}
	}
}
