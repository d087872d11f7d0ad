package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// A failover as the fault tests make it: what the primary committed is on
// its synchronous standby; the standby, promoted, takes writes; the old
// primary, rewound, streams from it; and a multi-host URL with
// target_session_attrs=read-write reaches whichever takes writes.
func TestStandbyPromoteRejoin(t *testing.T) {
	t.Parallel()
	primary := Start(t)
	standby := primary.Standby()
	both := FailoverURL("postgres", primary, standby)
	mustExec(t, both, "CREATE TABLE t (n int)")
	mustExec(t, both, "INSERT INTO t VALUES (1)")
	if port := serverPort(t, both); port != primary.Port {
		t.Fatalf("the URL reached port %d, want the primary's %d", port, primary.Port)
	}
	if err := primary.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, both, "INSERT INTO t VALUES (2)")
	if port := serverPort(t, both); port != standby.Port {
		t.Fatalf("the URL reached port %d, want the promoted standby's %d", port, standby.Port)
	}
	if n := count(t, standby.URL("postgres")); n != 2 {
		t.Fatalf("the promoted standby has %d rows, want 2 (the synchronous commit kept the first)", n)
	}
	primary.Rejoin(standby)
	var inRecovery bool
	if err := primary.withConn(func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery)
	}); err != nil || !inRecovery {
		t.Fatalf("the old primary, rejoined: in recovery %v (%v), want a standby", inRecovery, err)
	}
	mustExec(t, both, "INSERT INTO t VALUES (3)")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(primary.Dir, "log"))
			t.Logf("old primary's log:\n%s", b)
		}
	})
	waitfor.True(t, 30*time.Second, "the rejoined standby replays the new primary's writes", func() bool {
		return count(t, primary.URL("postgres")) == 3
	})
	if port := serverPort(t, both); port != standby.Port {
		t.Fatalf("with the old primary back as a standby, the URL reached port %d, want %d", port, standby.Port)
	}
}

func mustExec(t *testing.T, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func serverPort(t *testing.T, url string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var port int
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('port')::int").Scan(&port); err != nil {
		t.Fatal(err)
	}
	return port
}

func count(t *testing.T, url string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
