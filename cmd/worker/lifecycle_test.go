package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// insertTx enqueues n events in one transaction, so one claim sees them all.
func insertTx(t *testing.T, db *testdb.DB, n int) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(),
		"INSERT INTO webhook_outbox (event_type, payload) SELECT 'e', jsonb_build_object('i', g) FROM generate_series(1, $1) g", n)
	if err != nil {
		t.Fatal(err)
	}
}

// holdingConsumer answers nothing until release is called.
func holdingConsumer(t *testing.T) (*consumer, func()) {
	return firstHeld(t, math.MaxInt64)
}

func waitArrivals(t *testing.T, c *consumer, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-c.arrived:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d requests arrived", i, n)
		}
	}
}

func TestSIGKILLMidBatchLosesNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c, _ := holdingConsumer(t)
	p := startProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_TIMEOUT_MS": "1000"}))
	insertTx(t, db, 5)
	waitArrivals(t, c, 5)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 10*time.Second)
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"); n != 5 {
		t.Fatalf("after SIGKILL %d rows pending, want all 5", n)
	}
	ok := newConsumer(t, nil)
	startProcess(t, baseEnv(db, ok, map[string]string{"WEBHOOK_TIMEOUT_MS": "1000"}))
	waitProcessed(t, db, 5, 20*time.Second)
	if got := len(ok.byID()); got != 5 {
		t.Fatalf("second worker delivered %d distinct events, want 5", got)
	}
}

func TestSIGTERMDrainsTheBatchInFlight(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c, release := holdingConsumer(t)
	p := startProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_SHUTDOWN_TIMEOUT_MS": "20000"}))
	insertTx(t, db, 5)
	waitArrivals(t, c, 5)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 10*time.Second, "worker logs that it is stopping", func() bool {
		return strings.Contains(p.logs.String(), "worker: stopping")
	})
	insertTx(t, db, 3) // after SIGTERM: must not be claimed
	release()
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0; logs:\n%s", code, p.logs.String())
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed"); n != 5 {
		t.Fatalf("processed %d, want the 5 in flight", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND lease_token IS NULL"); n != 3 {
		t.Fatalf("pending and unleased %d, want the 3 inserted after SIGTERM", n)
	}
	if got := len(c.deliveries()); got != 5 {
		t.Fatalf("consumer got %d requests, want 5 (no duplicate)", got)
	}
}

func TestShutdownTimeoutAbortsAndKeepsRows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c, _ := holdingConsumer(t)
	p := startProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_SHUTDOWN_TIMEOUT_MS": "300"}))
	insertTx(t, db, 2)
	waitArrivals(t, c, 2)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != exitFailure {
		t.Fatalf("exit code %d, want %d", code, exitFailure)
	}
	if !strings.Contains(p.logs.String(), "shutdown timeout exceeded") {
		t.Fatalf("logs do not explain the exit:\n%s", p.logs.String())
	}
	// Cut short, the rows are released rather than left to their lease: the
	// next worker takes them at once.
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND lease_token IS NULL"); n != 2 {
		t.Fatalf("pending and released %d, want 2", n)
	}
}

func TestTwoWorkersNeverDuplicate(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	env := baseEnv(db, c, map[string]string{"WEBHOOK_BATCH_SIZE": "5", "WEBHOOK_CONCURRENCY": "10"})
	startProcess(t, env)
	startProcess(t, env)
	const n = 400
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for i := range n / 4 {
				db.Insert(t, "e", fmt.Sprintf(`{"p":%d,"i":%d}`, p, i))
			}
		})
	}
	wg.Wait()
	waitProcessed(t, db, n, 30*time.Second)
	ids := c.byID()
	if len(ids) != n {
		t.Fatalf("distinct deliveries %d, want %d", len(ids), n)
	}
	for id, k := range ids {
		if k != 1 {
			t.Fatalf("delivery %s sent %d times", id, k)
		}
	}
}

func TestUnmigratedDatabaseExits(t *testing.T) {
	t.Parallel()
	db := testdb.NewEmpty(t)
	c := newConsumer(t, nil)
	p := startProcess(t, baseEnv(db, c, nil))
	if code := p.wait(t, 20*time.Second); code != exitSchema {
		t.Fatalf("exit code %d, want %d", code, exitSchema)
	}
	if !strings.Contains(p.logs.String(), "worker migrate") {
		t.Fatalf("message does not name `worker migrate`:\n%s", p.logs.String())
	}
	m := startProcess(t, baseEnv(db, c, nil), "migrate")
	if code := m.wait(t, 20*time.Second); code != 0 || !strings.Contains(m.logs.String(), "applied migrations/001_outbox.sql") {
		t.Fatalf("migrate: exit %d\n%s", code, m.logs.String())
	}
}

func TestBadConfigurationExitsNamingTheVariable(t *testing.T) {
	t.Parallel()
	db := testdb.NewEmpty(t)
	c := newConsumer(t, nil)
	p := startProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_BATCH_SIZE": "lots"}))
	if code := p.wait(t, 20*time.Second); code != exitUsage {
		t.Fatalf("exit code %d, want %d", code, exitUsage)
	}
	if out := p.logs.String(); !strings.Contains(out, "WEBHOOK_BATCH_SIZE") || strings.Contains(out, testSecret) {
		t.Fatalf("output:\n%s", out)
	}
}

var addrRE = regexp.MustCompile(`"addr":"([^"]+)"`)

func TestListenerReconnectsAndHealthEndpoints(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	w := startInProcess(t, baseEnv(db, c, nil))
	base := metricsBase(t, w.logs)
	get := func(path string) (int, string) { return httpGet(base + path) }
	waitfor.True(t, 10*time.Second, "ready", func() bool { code, _ := get("/readyz"); return code == 200 })
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}

	_, err := db.Pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'fluxora-webhook-listener' AND datname = current_database()`)
	if err != nil {
		t.Fatal(err)
	}
	insertTx(t, db, 3) // while the listener is gone: delivered after it reconnects, not by the poll
	waitfor.True(t, 5*time.Second, "events inserted during the outage delivered promptly", func() bool {
		return len(c.deliveries()) == 3
	})
	waitfor.True(t, 10*time.Second, "ready again", func() bool { code, _ := get("/readyz"); return code == 200 })
	db.Insert(t, "e", `{}`)
	waitfor.True(t, 5*time.Second, "event after the reconnect delivered", func() bool { return len(c.deliveries()) == 4 })

	_, body := get("/metrics")
	for _, name := range []string{
		"fluxora_webhook_deliveries_total", "fluxora_webhook_attempt_duration_seconds", "fluxora_webhook_end_to_end_lag_seconds",
		"fluxora_webhook_claimed_batches_total", "fluxora_webhook_notifications_received_total", "fluxora_webhook_poll_wakeups_total",
		"fluxora_webhook_retries_scheduled_total", "fluxora_webhook_dead_letters_total", "fluxora_webhook_circuit_breaker_transitions_total",
		"fluxora_webhook_listener_connects_total",
	} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if !strings.Contains(body, `fluxora_webhook_listener_connects_total 2`) {
		t.Errorf("want 2 listener connects after the reconnect:\n%s", grep(body, "listener"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
