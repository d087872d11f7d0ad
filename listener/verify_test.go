package listener_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/internal/pgbouncer"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/listener"
)

// notifyThrough is a Probe that sends its NOTIFY through db's pool.
func notifyThrough(db *testdb.DB) func(context.Context, string) error {
	return func(ctx context.Context, channel string) error {
		_, err := db.Pool.Exec(ctx, "SELECT pg_notify($1, '')", channel)
		return err
	}
}

// runListener runs l until the test ends and returns Run's result channel
// (capacity 1; whoever receives from it puts the result back).
func runListener(t *testing.T, l *listener.Listener) chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			done <- err
		case <-time.After(10 * time.Second):
			t.Error("Listener.Run did not return within 10s of cancel")
		}
	})
	return done
}

// waitReady waits for l's first verified LISTEN; Run must not return.
func waitReady(t *testing.T, l *listener.Listener, done chan error) {
	t.Helper()
	select {
	case <-l.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("Run returned %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("not ready within 20s")
	}
}

func newProbed(t *testing.T, db *testdb.DB, connect func(context.Context) (*pgx.Conn, error)) *listener.Listener {
	t.Helper()
	l, err := listener.New(listener.Config{Connect: connect, Probe: notifyThrough(db),
		ReconnectDelay: 50 * time.Millisecond, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestVerifiesTheConnectionHears(t *testing.T) {
	t.Parallel()

	t.Run("a direct connection passes and is ready", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		l := newProbed(t, db, connectAs(db, "verify_direct"))
		done := runListener(t, l)
		waitReady(t, l, done)
		waitWake(t, l, "backlog wake")
		db.Insert(t, "e", `{}`)
		waitWake(t, l, "insert")
	})

	t.Run("a connection through PgBouncer in transaction mode is deaf", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		b := pgbouncer.Start(t, db.URL)
		l := newProbed(t, db, func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, b.URL()) })
		done := runListener(t, l)
		select {
		case err := <-done:
			done <- err
			if !errors.Is(err, listener.ErrDeaf) {
				t.Fatalf("Run returned %v, want ErrDeaf", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not refuse the deaf connection within 30s")
		}
		select {
		case <-l.Ready():
			t.Fatal("a deaf listener became ready")
		default:
		}
		if l.Connected() {
			t.Fatal("a deaf listener reports connected")
		}
	})

	t.Run("a connection through PgBouncer in session mode passes", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		b := pgbouncer.Start(t, db.URL, "pool_mode = session")
		l := newProbed(t, db, func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, b.URL()) })
		done := runListener(t, l)
		waitReady(t, l, done)
		waitWake(t, l, "backlog wake")
		db.Insert(t, "e", `{}`)
		waitWake(t, l, "insert")
	})

	t.Run("a reconnect that lands on PgBouncer ends Run", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		b := pgbouncer.Start(t, db.URL)
		var connects atomic.Int64
		direct := connectAs(db, "verify_reconnect")
		l := newProbed(t, db, func(ctx context.Context) (*pgx.Conn, error) {
			if connects.Add(1) == 1 {
				return direct(ctx)
			}
			return pgx.Connect(ctx, b.URL())
		})
		done := runListener(t, l)
		waitfor.True(t, 20*time.Second, "connected directly", l.Connected)
		_, err := db.Pool.Exec(context.Background(),
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'verify_reconnect' AND datname = current_database()")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			done <- err
			if !errors.Is(err, listener.ErrDeaf) {
				t.Fatalf("Run returned %v, want ErrDeaf", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not refuse the deaf reconnect within 30s")
		}
	})

	t.Run("a failed probe is retried, not deaf", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		var probes atomic.Int64
		notify := notifyThrough(db)
		l, err := listener.New(listener.Config{Connect: connectAs(db, "verify_retry"),
			Probe: func(ctx context.Context, channel string) error {
				if probes.Add(1) == 1 {
					return errors.New("pool unavailable")
				}
				return notify(ctx, channel)
			},
			ReconnectDelay: 50 * time.Millisecond, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		done := runListener(t, l)
		waitReady(t, l, done)
		if n := probes.Load(); n != 2 {
			t.Fatalf("%d probes, want 2", n)
		}
	})
}
