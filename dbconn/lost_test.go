package dbconn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// The errors that say a server can no longer take the worker's writes are
// told apart from every other, wrapped or not.
func TestLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&pgconn.PgError{Code: "25006", Message: "cannot execute UPDATE in a read-only transaction"}, lostReadOnly},
		{fmt.Errorf("claim: %w", &pgconn.PgError{Code: "25006"}), lostReadOnly},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}, lostShutdown},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P02"}, lostShutdown},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"}, lostShutdown},
		{&pgconn.PgError{Code: "40P01", Message: "deadlock detected"}, ""},
		{&pgconn.PgError{Code: "55P03", Message: "lock not available"}, ""},
		{errors.New("read only"), ""},
		{context.Canceled, ""},
	} {
		if got := lost(tc.err); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A statement that finds its server read-only drops every connection of
// the pool, the idle ones and its own, tells OnLost and counts it; the
// pool then works on new connections. A statement cut short by its own
// context drops nothing.
func TestPoolDropsEveryConnectionOnReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	reg := prometheus.NewRegistry()
	var onLost atomic.Int32
	pool, _, err := Open(ctx, Config{DatabaseURL: db.URL, Size: 3, Registerer: reg, OnLost: func() { onLost.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	before := backends(t, pool, 3)

	cut, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := pool.Exec(cut, "SELECT pg_sleep(5)"); err == nil {
		t.Fatal("pg_sleep(5) outlived its 50 ms context")
	}
	if onLost.Load() != 0 {
		t.Fatal("a statement cut short by its own context dropped the pool")
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE TEMP TABLE t (n int)")
	conn.Release()
	if lost(err) != lostReadOnly {
		t.Fatalf("a write on a read-only session: %v", err)
	}
	if n := onLost.Load(); n != 1 {
		t.Fatalf("OnLost called %d times, want 1", n)
	}
	want := `# HELP fluxora_webhook_database_resets_total Times the worker dropped every database connection because a statement found the server read-only, shutting down or gone (a failover, a restart), by reason.
# TYPE fluxora_webhook_database_resets_total counter
fluxora_webhook_database_resets_total{reason="connection_lost"} 0
fluxora_webhook_database_resets_total{reason="read_only"} 1
fluxora_webhook_database_resets_total{reason="shutdown"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fluxora_webhook_database_resets_total"); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "the pool's old backends gone", func() bool {
		return db.Count(t, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", before) == 0
	})
	if after := backends(t, pool, 3); slices.ContainsFunc(after, func(pid uint32) bool { return slices.Contains(before, pid) }) {
		t.Fatalf("backends %v after the reset, %v before: one was kept", after, before)
	}
	if err := Writable(ctx, pool); err != nil {
		t.Fatalf("the new connections: %v", err)
	}
}

// backends holds n connections of pool at once and returns their backend
// pids.
func backends(t *testing.T, pool *pgxpool.Pool, n int) []uint32 {
	t.Helper()
	var pids []uint32
	for range n {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		pids = append(pids, c.Conn().PgConn().PID())
	}
	return pids
}

// A server that takes no writes: the worker's own connections refuse it,
// the listener's probe through the pool fails (it must never pass for
// deafness), and readiness says read-only.
func TestReadOnlyServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(ctx, "ALTER DATABASE "+db.Name+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	base, err := ListenBase(ctx, db.URL+"&target_session_attrs=any")
	if !errors.Is(err, pgconn.ErrReadOnlyConnection) || base != nil {
		t.Fatalf("the listen connection to a read-only server: %v", err)
	}
	pool, err := OpenPath(ctx, Config{DatabaseURL: db.URL, Size: 2}, Pooled)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := NotifyProbe(pool)(ctx, "fluxora_probe_test"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("the probe through a read-only pool: %v", err)
	}
	if err := Writable(ctx, pool); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("readiness of a read-only pool: %v", err)
	}
}
