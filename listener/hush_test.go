package listener_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/listener"
)

func startHush(t *testing.T, db *testdb.DB, reg *prometheus.Registry) *listener.Hush {
	t.Helper()
	h, err := listener.NewHush(listener.HushConfig{Connect: connectAs(db, "hush_test"), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, "Hush.Run", h.Run)
	return h
}

// producerMayNotify is the trigger's own test: can a transaction take the
// notifier lock?
func producerMayNotify(t *testing.T, db *testdb.DB) bool {
	t.Helper()
	tx, err := db.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	var ok bool
	if err := tx.QueryRow(context.Background(), "SELECT pg_try_advisory_xact_lock(hashtext('fluxora_webhook'), 1)").Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestNewHushValidates(t *testing.T) {
	t.Parallel()
	if _, err := listener.NewHush(listener.HushConfig{Registerer: prometheus.NewRegistry()}); err == nil {
		t.Fatal("missing Connect accepted")
	}
	if _, err := listener.NewHush(listener.HushConfig{Connect: func(context.Context) (*pgx.Conn, error) { return nil, nil }}); err == nil {
		t.Fatal("missing Registerer accepted")
	}
}

func TestHush(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	h := startHush(t, b.db, b.reg)
	waitWake(t, l, "connect")
	hushed := func() bool { return metric(t, b.reg, "fluxora_webhook_notify_hushed") == 1 }
	notes := func() float64 { return metric(t, b.reg, "fluxora_webhook_notifications_received_total") }

	if !producerMayNotify(t, b.db) {
		t.Fatal("a producer cannot notify before any hush")
	}
	h.Set(true)
	waitfor.True(t, 10*time.Second, "hush held", hushed)
	if producerMayNotify(t, b.db) {
		t.Fatal("a producer may notify while the hush is held")
	}
	b.db.Insert(t, "e", `{}`) // commits without a NOTIFY

	// Help notifies even though producers cannot.
	before := notes()
	h.Help()
	select {
	case <-l.Wake():
	case <-time.After(10 * time.Second):
		// hushed false: the Hush lost its session (its NOTIFY failed).
		t.Fatalf("no wake-up after Help: hushed %v, notifications %v", hushed(), notes())
	}
	if n := notes(); n != before+1 {
		t.Fatalf("notifications went from %v to %v after one Help (the hushed insert must not notify)", before, n)
	}

	h.Set(false)
	waitfor.True(t, 10*time.Second, "hush released", func() bool { return !hushed() })
	if !producerMayNotify(t, b.db) {
		t.Fatal("a producer cannot notify after the release")
	}
	b.db.Insert(t, "e", `{}`)
	waitWake(t, l, "insert after release")

	// A lost session releases the lock on the server; the next Set(true)
	// connects again.
	h.Set(true)
	waitfor.True(t, 10*time.Second, "hush held again", hushed)
	if _, err := b.db.Pool.Exec(context.Background(),
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'hush_test' AND datname = current_database()"); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "lock released with the session", func() bool { return producerMayNotify(t, b.db) })
	waitfor.True(t, 10*time.Second, "hush notices the lost session", func() bool {
		h.Help() // any use of the dead connection notices
		return !hushed()
	})
	h.Set(true)
	waitfor.True(t, 10*time.Second, "hush held on a new session", hushed)
	if producerMayNotify(t, b.db) {
		t.Fatal("a producer may notify while the new session holds the hush")
	}
}

// Drop closes the Hush's session (the pool found its server read-only: a
// failover), which releases the lock; the next Set(true) takes it on a
// new session.
func TestHushDrop(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	reg := prometheus.NewRegistry()
	h := startHush(t, db, reg)
	hushed := func() bool { return metric(t, reg, "fluxora_webhook_notify_hushed") == 1 }
	sessions := func() int {
		return db.Count(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hush_test' AND datname = current_database()")
	}
	h.Set(true)
	waitfor.True(t, 10*time.Second, "hush held", hushed)
	h.Drop()
	waitfor.True(t, 10*time.Second, "hush not held after Drop", func() bool { return !hushed() })
	waitfor.True(t, 10*time.Second, "its session gone", func() bool { return sessions() == 0 })
	if !producerMayNotify(t, db) {
		t.Fatal("a producer cannot notify after the drop")
	}
	h.Set(false)
	h.Set(true)
	waitfor.True(t, 10*time.Second, "hush held on a new session", hushed)
	if producerMayNotify(t, db) {
		t.Fatal("a producer may notify while the new session holds the hush")
	}
}
