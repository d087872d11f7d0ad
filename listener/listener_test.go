package listener_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/listener"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type bundle struct {
	db  *testdb.DB
	reg *prometheus.Registry
}

func setup(t *testing.T) (*listener.Listener, bundle) {
	t.Helper()
	db := testdb.New(t)
	reg := prometheus.NewRegistry()
	l, err := listener.New(listener.Config{
		Connect:        connectAs(db, "listener_test"),
		ReconnectDelay: 50 * time.Millisecond,
		Registerer:     reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, "Listener.Run", l.Run)
	return l, bundle{db: db, reg: reg}
}

// connectAs opens a connection to db with the given application_name (so a
// test can terminate it by name).
func connectAs(db *testdb.DB, applicationName string) func(context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		cfg, err := pgx.ParseConfig(db.URL)
		if err != nil {
			return nil, err
		}
		cfg.RuntimeParams["application_name"] = applicationName
		return pgx.ConnectConfig(ctx, cfg)
	}
}

// runUntilCleanup runs run on its own goroutine until the test ends, then
// cancels it and fails the test if it returned an error.
func runUntilCleanup(t *testing.T, name string, run func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s returned %v after cancel", name, err)
		}
	})
}

func waitWake(t *testing.T, l *listener.Listener, what string) {
	t.Helper()
	select {
	case <-l.Wake():
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up: %s", what)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := listener.New(listener.Config{Registerer: prometheus.NewRegistry()}); err == nil {
		t.Fatal("missing Connect accepted")
	}
	if _, err := listener.New(listener.Config{Connect: func(context.Context) (*pgx.Conn, error) { return nil, nil }}); err == nil {
		t.Fatal("missing Registerer accepted")
	}
}

func TestListener(t *testing.T) {
	t.Parallel()

	t.Run("wakes on connect and on a committed insert", func(t *testing.T) {
		t.Parallel()
		l, b := setup(t)
		waitWake(t, l, "backlog wake after connect")
		if !l.Connected() {
			t.Fatal("not connected after the backlog wake")
		}
		b.db.Insert(t, "e", `{}`)
		waitWake(t, l, "insert")
		if n := metric(t, b.reg, "fluxora_webhook_notifications_received_total"); n < 1 {
			t.Fatalf("notifications metric = %v", n)
		}
	})

	t.Run("future rows do not notify", func(t *testing.T) {
		t.Parallel()
		l, b := setup(t)
		waitWake(t, l, "connect")
		_, err := b.db.Pool.Exec(context.Background(),
			"INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('e', '{}', now() + interval '1 hour')")
		if err != nil {
			t.Fatal(err)
		}
		b.db.Insert(t, "e", `{}`) // a due row after it: its notification proves the first sent none
		waitWake(t, l, "due insert")
		if n := metric(t, b.reg, "fluxora_webhook_notifications_received_total"); n != 1 {
			t.Fatalf("notifications = %v, want 1 (the future row must not notify)", n)
		}
	})

	t.Run("reconnects after pg_terminate_backend", func(t *testing.T) {
		t.Parallel()
		l, b := setup(t)
		waitWake(t, l, "connect")
		_, err := b.db.Pool.Exec(context.Background(),
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'listener_test' AND datname = current_database()")
		if err != nil {
			t.Fatal(err)
		}
		waitfor.True(t, 10*time.Second, "listener notices the lost connection", func() bool { return !l.Connected() })
		waitWake(t, l, "backlog wake after reconnect")
		waitfor.True(t, 10*time.Second, "listener reconnects", l.Connected)
		b.db.Insert(t, "e", `{}`)
		waitWake(t, l, "insert after reconnect")
	})

	// Drop leaves a connection that still works (the pool found its server
	// read-only: a failover) and LISTENs again on a new one at once,
	// without counting a connection error.
	t.Run("Drop reconnects at once", func(t *testing.T) {
		t.Parallel()
		l, b := setup(t)
		waitWake(t, l, "connect")
		before := listenerPIDs(t, b.db)
		if len(before) != 1 {
			t.Fatalf("listener sessions %v, want 1", before)
		}
		l.Drop()
		if l.Connected() {
			t.Fatal("connected right after Drop")
		}
		waitWake(t, l, "backlog wake after the drop")
		waitfor.True(t, 10*time.Second, "listener connected again", l.Connected)
		waitfor.True(t, 10*time.Second, "the dropped session gone, one new", func() bool {
			after := listenerPIDs(t, b.db)
			return len(after) == 1 && after[0] != before[0]
		})
		if n := metric(t, b.reg, "fluxora_webhook_listener_connects_total"); n != 2 {
			t.Fatalf("connects %v, want 2", n)
		}
		if n := metric(t, b.reg, "fluxora_webhook_listener_errors_total"); n != 0 {
			t.Fatalf("errors %v after a drop, want 0", n)
		}
		b.db.Insert(t, "e", `{}`)
		waitWake(t, l, "insert after the drop")
	})
}

// listenerPIDs are the backends of the test's listener.
func listenerPIDs(t *testing.T, db *testdb.DB) []int32 {
	t.Helper()
	var pids []int32
	err := db.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
		WHERE application_name = 'listener_test' AND datname = current_database()`).Scan(&pids)
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// metric reads a counter's or a gauge's value.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
