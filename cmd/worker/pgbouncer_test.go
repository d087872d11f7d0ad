package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/internal/pgbouncer"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/producer"
	"github.com/fluxora/webhook-worker/retention"
)

// Behind PgBouncer in transaction mode (README, "Behind PgBouncer"): the
// worker's pool, the producers and the operator commands go through a
// private PgBouncer (internal/pgbouncer); only the listener and the hush
// connect directly, through WEBHOOK_LISTEN_DATABASE_URL.

// bounced is a test database and a private PgBouncer in front of it.
type bounced struct {
	db  *testdb.DB
	url string // the database through PgBouncer
}

func setupBounced(t *testing.T) bounced {
	t.Helper()
	db := testdb.New(t)
	return bounced{db: db, url: pgbouncer.Start(t, db.URL).URL()}
}

// env is baseEnv with DATABASE_URL through PgBouncer and the listener
// direct.
func (s bounced) env(c *consumer, overrides map[string]string) map[string]string {
	o := map[string]string{"WEBHOOK_LISTEN_DATABASE_URL": s.db.URL}
	maps.Copy(o, overrides)
	return envFor(s.url, c, o)
}

// producerPool is a producer's pool through PgBouncer in the given pgx
// query exec mode (cache_describe, exec or simple_protocol: a producer's
// client must not use named prepared statements there).
func (s bounced) producerPool(t *testing.T, mode string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), s.url+"&default_query_exec_mode="+mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// opsVia runs an operator command in-process against databaseURL.
func opsVia(databaseURL string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	env := map[string]string{"DATABASE_URL": databaseURL, "WEBHOOK_SECRETS_KEY_FILE": keyFilePath()}
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

// noAdvisoryLocks fails the test if any session holds an advisory lock on
// db: a session lock taken through PgBouncer would stay behind.
func noAdvisoryLocks(t *testing.T, db *testdb.DB) {
	t.Helper()
	if n := db.Count(t, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
		WHERE l.locktype = 'advisory' AND d.datname = current_database()`); n != 0 {
		t.Fatalf("%d advisory locks left behind", n)
	}
}

// quietLogs fails the test on any warning or error logged, other than the
// expected messages: a database error through PgBouncer (a prepared
// statement, a refused parameter) shows up as one.
func quietLogs(t *testing.T, logs string, expected ...string) {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var l struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &l) != nil || (l.Level != "WARN" && l.Level != "ERROR") || slices.Contains(expected, l.Msg) {
			continue
		}
		t.Fatalf("unexpected log line: %s", line)
	}
}

// Producers insert through PgBouncer in the three documented ways; their
// trigger's NOTIFY wakes the worker, whose pool goes through PgBouncer too.
// A third of the events fail their first attempt and are retried. Every
// event is delivered, signed, exactly once per attempt.
func TestPgBouncerDeliveryAndRetries(t *testing.T) {
	t.Parallel()
	s := setupBounced(t)
	c := newConsumer(t, func(d delivery) int {
		if bytes.Contains(d.Body, []byte(`"retry"`)) && d.Attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	w := startInProcess(t, s.env(c, nil))
	base := startedWorker(t, w.logs)
	if !strings.Contains(w.logs.String(), `"database_path":"pooled"`) {
		t.Fatalf("the worker did not take the pooled path:\n%s", w.logs.String())
	}
	ctx := context.Background()
	plain, exec, kit := s.producerPool(t, "simple_protocol"), s.producerPool(t, "exec"), s.producerPool(t, "cache_describe")
	const each = 10
	retries := 0
	for i := range each {
		mark := "first"
		if i%3 == 0 {
			mark, retries = "retry", retries+1
		}
		if _, err := plain.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload) VALUES ('plain', $1)", fmt.Sprintf(`{"i": %d, "m": %q}`, i, mark)); err != nil {
			t.Fatalf("plain INSERT: %v", err)
		}
		if _, err := exec.Exec(ctx, "SELECT webhook_enqueue('fn', $1::jsonb)", fmt.Sprintf(`{"i": %d, "m": %q}`, i, mark)); err != nil {
			t.Fatalf("webhook_enqueue: %v", err)
		}
		tx, err := kit.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := producer.EnqueueJSON(ctx, tx, "kit", map[string]any{"i": i, "m": mark}); err != nil {
			t.Fatalf("producer kit: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.True(t, 30*time.Second, "every event processed", func() bool {
		return s.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0 &&
			s.db.Count(t, "SELECT count(*) FROM webhook_outbox") == 3*each+3*retries
	})
	ids := c.byID()
	if len(ids) != 3*each {
		t.Fatalf("%d distinct deliveries, want %d", len(ids), 3*each)
	}
	for _, d := range c.deliveries() {
		want := 1
		if bytes.Contains(d.Body, []byte(`"retry"`)) {
			want = 2
		}
		if !d.SignatureOK || ids[d.ID] != want {
			t.Fatalf("delivery %+v: signature ok %v, %d requests, want %d", d, d.SignatureOK, ids[d.ID], want)
		}
	}
	if n := s.db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	quietLogs(t, w.logs.String(), "dispatcher: attempt failed; retry scheduled")
	if n := metricValue(t, base, "fluxora_webhook_notifications_received_total"); n < 1 {
		t.Fatalf("no NOTIFY through PgBouncer reached the worker (%v)", n)
	}
}

// The gates (Redis) work with the pool through PgBouncer: the circuit
// breaker opens, defers the rows (written through PgBouncer), probes, and
// every event is delivered once the consumer is healthy.
func TestPgBouncerGates(t *testing.T) {
	t.Parallel()
	s := setupBounced(t)
	var healthy atomic.Bool
	c := newConsumer(t, func(delivery) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	w := startInProcess(t, s.env(c, map[string]string{
		"REDIS_URL": testRedisURL(t, c), "WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "3", "WEBHOOK_RETRY_RPS": "5",
		"WEBHOOK_GATE_TIMEOUT_MS": loadedGateTimeout, "WEBHOOK_CIRCUIT_BREAKER_RESET_MS": "1000",
		"WEBHOOK_MAX_ATTEMPTS": "1000", "WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "20",
	}))
	base := startedWorker(t, w.logs)
	pool := s.producerPool(t, "cache_describe")
	for i := range 5 {
		if _, err := producer.EnqueueJSON(context.Background(), pool, "e", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.True(t, 30*time.Second, "the open circuit defers rows", func() bool {
		return metricValue(t, base, "fluxora_webhook_deferred_total") > 0
	})
	healthy.Store(true)
	waitfor.True(t, 60*time.Second, "delivered after the probe", func() bool {
		return s.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	delivered := map[string]bool{}
	for _, d := range c.deliveries() {
		if d.Status == http.StatusOK {
			if delivered[d.ID] {
				t.Fatalf("delivery %s answered 200 twice", d.ID)
			}
			delivered[d.ID] = true
		}
	}
	quietLogs(t, w.logs.String(), "dispatcher: attempt failed; retry scheduled")
	if len(delivered) != 5 || s.db.Count(t, "SELECT count(*) FROM webhook_dead_letter") != 0 {
		t.Fatalf("%d of 5 delivered; dead letters %d", len(delivered), s.db.Count(t, "SELECT count(*) FROM webhook_dead_letter"))
	}
}

// A worker process killed with requests in flight: a second one, through
// the same PgBouncer, takes its rows over when their leases expire.
func TestPgBouncerSIGKILLRecovery(t *testing.T) {
	t.Parallel()
	s := setupBounced(t)
	c, _ := firstHeld(t, 5)
	env := s.env(c, map[string]string{"WEBHOOK_TIMEOUT_MS": "2000"})
	dead := startProcess(t, env)
	startedWorker(t, dead.logs)
	pool := s.producerPool(t, "exec")
	if _, err := pool.Exec(context.Background(),
		"INSERT INTO webhook_outbox (event_type, payload) SELECT 'e', jsonb_build_object('i', g) FROM generate_series(1, 5) g"); err != nil {
		t.Fatal(err)
	}
	waitArrivals(t, c, 5)
	// Frozen at once, so that neither its timeouts nor its sweep touch
	// the rows however long the survivor takes to start on a busy
	// machine; killed once the survivor runs.
	if err := dead.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	survivor := startProcess(t, env)
	base := startedWorker(t, survivor.logs)
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	dead.wait(t, 10*time.Second)
	waitProcessed(t, s.db, 5, 30*time.Second)
	if got := len(c.byID()); got != 5 {
		t.Fatalf("delivered %d distinct events, want 5", got)
	}
	if n := metricValue(t, base, "fluxora_webhook_leases_reclaimed_total"); n != 5 {
		t.Fatalf("leases reclaimed = %v, want 5", n)
	}
	if n := s.db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 5 {
		t.Fatalf("%d outbox rows, want the 5 events only", n)
	}
	quietLogs(t, survivor.logs.String(),
		"dispatcher: took over rows whose lease had expired (their worker died, froze or lost the database)")
}

// migrate (twice at once), endpoints add and list, status, dlq list and
// replay, all with DATABASE_URL through PgBouncer, leave no session state
// behind; the dead letters come from a worker through PgBouncer too.
func TestPgBouncerOperatorCommands(t *testing.T) {
	t.Parallel()
	db := testdb.NewEmpty(t)
	s := bounced{db: db, url: pgbouncer.Start(t, db.URL).URL()}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() { codes[i], _, _ = opsVia(s.url, "migrate") })
	}
	wg.Wait()
	if codes[0] != exitOK || codes[1] != exitOK {
		t.Fatalf("two migrates at once through PgBouncer: exit %v", codes)
	}
	if code, out, errs := opsVia(s.url, "migrate"); code != exitOK || !strings.Contains(out, "schema is up to date") {
		t.Fatalf("migrate again: exit %d: %s%s", code, out, errs)
	}
	noAdvisoryLocks(t, db)
	retentionRound(t, s)

	var failing atomic.Bool
	failing.Store(true)
	c := newConsumer(t, func(delivery) int {
		if failing.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	if code, out, errs := opsVia(s.url, "endpoints", "add", "--name", "billing", "--url", c.srv.URL, "--secret", testSecret); code != exitOK {
		t.Fatalf("endpoints add: exit %d: %s%s", code, out, errs)
	}
	if code, out, _ := opsVia(s.url, "endpoints", "list"); code != exitOK || !strings.Contains(out, "billing") {
		t.Fatalf("endpoints list: exit %d:\n%s", code, out)
	}
	w := startInProcess(t, s.env(nil, map[string]string{"WEBHOOK_MAX_ATTEMPTS": "1"}))
	pool := s.producerPool(t, "cache_describe")
	for i := range 3 {
		if _, err := producer.EnqueueJSON(context.Background(), pool, "e", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	waitfor.True(t, 30*time.Second, "3 dead letters", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_dead_letter") == 3
	})
	code, out, errs := opsVia(s.url, "status", "--json")
	var st outboxStatus
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || st.DeadLetters != 3 {
		t.Fatalf("status: exit %d, %v: %s%s", code, err, out, errs)
	}
	if code, out, _ := opsVia(s.url, "dlq", "list"); code != exitOK || strings.Count(out, "billing") != 3 {
		t.Fatalf("dlq list: exit %d:\n%s", code, out)
	}
	failing.Store(false)
	if code, out, errs := opsVia(s.url, "dlq", "replay", "--all"); code != exitOK {
		t.Fatalf("dlq replay: exit %d: %s%s", code, out, errs)
	}
	waitfor.True(t, 30*time.Second, "the replayed dead letters delivered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0 &&
			db.Count(t, "SELECT count(*) FROM webhook_dead_letter") == 0
	})
	ok := map[string]int{}
	for _, d := range c.deliveries() {
		if d.Status == http.StatusOK {
			ok[d.ID]++
		}
	}
	quietLogs(t, w.logs.String(), "dispatcher: dead-lettered")
	if len(ok) != 3 {
		t.Fatalf("%d of 3 replayed deliveries answered 200: %v", len(ok), ok)
	}
	for id, n := range ok {
		if n != 1 {
			t.Fatalf("delivery %s answered 200 %d times", id, n)
		}
	}
}

// retentionRound runs one retention round through PgBouncer: its lock is
// transaction-scoped, so none stays behind.
func retentionRound(t *testing.T, s bounced) {
	t.Helper()
	if _, err := s.db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at)
		SELECT 'e', '{}', true, now() - interval '30 days' FROM generate_series(1, 50)`); err != nil {
		t.Fatal(err)
	}
	d, err := retention.New(retention.Config{Pool: s.producerPool(t, "cache_describe"), Retention: time.Hour, BatchSize: 20,
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if n, skipped, err := d.RunOnce(context.Background()); n != 50 || skipped || err != nil {
		t.Fatalf("retention through PgBouncer: deleted %d, skipped %v, %v", n, skipped, err)
	}
	noAdvisoryLocks(t, s.db)
}
