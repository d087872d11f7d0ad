package pgbouncer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/pgbouncer"
	"github.com/fluxora/webhook-worker/internal/testdb"
)

// The private PgBouncer is what a stock one in transaction mode is: it
// refuses startup parameters it does not know, and a LISTEN through it is
// accepted but hears nothing.
func TestTransactionModeBouncer(t *testing.T) {
	t.Parallel()
	db := testdb.NewEmpty(t)
	b := pgbouncer.Start(t, db.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cc, err := pgx.ParseConfig(b.URL())
	if err != nil {
		t.Fatal(err)
	}
	cc.RuntimeParams["synchronous_commit"] = "off"
	if c, err := pgx.ConnectConfig(ctx, cc); err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") {
		if c != nil {
			c.Close(ctx)
		}
		t.Fatalf("a startup parameter PgBouncer does not know: err %v, want unsupported startup parameter", err)
	}

	deaf, err := pgx.Connect(ctx, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer deaf.Close(ctx)
	var name string
	if err := deaf.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil || name != db.Name {
		t.Fatalf("through PgBouncer: database %q, %v; want %q", name, err, db.Name)
	}
	if _, err := deaf.Exec(ctx, "LISTEN probe"); err != nil {
		t.Fatalf("LISTEN through PgBouncer: %v", err)
	}
	if _, err := db.Pool.Exec(ctx, "NOTIFY probe"); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	if n, err := deaf.WaitForNotification(wctx); err == nil {
		t.Fatalf("a LISTEN through PgBouncer in transaction mode heard %+v", n)
	}
}
