package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// testRedisURL is the shared test Redis. Keys of a gate test are those of
// its consumer's URL (a fresh port per test), deleted at the end.
func testRedisURL(t *testing.T, c *consumer) string {
	t.Helper()
	u := os.Getenv("TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis is required (TEST_REDIS_URL): %v", err)
	}
	sum := sha256.Sum256([]byte(c.srv.URL))
	h := hex.EncodeToString(sum[:])
	t.Cleanup(func() {
		client.Del(context.Background(), "webhook_rl:"+h, "webhook_cb:"+h, "webhook_cb_probe:"+h)
		client.Close()
	})
	return u
}

// loadedGateTimeout is the gate timeout of tests that check gating itself:
// on a CI machine loaded by the parallel tests a Redis call can take longer
// than the 100 ms default, and the gates would (correctly) fail open.
const loadedGateTimeout = "5000"

func TestRetryRateLimitAcrossTwoWorkers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, func(delivery) int { return http.StatusServiceUnavailable })
	env := baseEnv(db, c, map[string]string{
		"REDIS_URL": testRedisURL(t, c), "WEBHOOK_RETRY_RPS": "4", "WEBHOOK_MAX_ATTEMPTS": "1000",
		"WEBHOOK_GATE_TIMEOUT_MS": loadedGateTimeout,
		"WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "20",
	})
	startProcess(t, env)
	startProcess(t, env)
	insertTx(t, db, 20)
	waitfor.True(t, 30*time.Second, "retries over 2.5 s", func() bool {
		var first, last time.Time
		for _, d := range c.deliveries() {
			if d.Attempt >= 2 {
				if first.IsZero() {
					first = d.At
				}
				last = d.At
			}
		}
		return !first.IsZero() && last.Sub(first) > 2500*time.Millisecond
	})
	received := 0
	for _, d := range c.deliveries() {
		if d.Attempt >= 2 {
			received++
		}
	}
	// The limit is judged on the times the retries started, which the
	// worker takes right after Redis allowed them: a receipt at the
	// consumer can come later by the machine's load (more than half a
	// second while the whole suite runs), and so bunch up with the next
	// window's. The retries recorded so far (the last may not be yet).
	rows, err := db.Pool.Query(context.Background(), `SELECT started_at FROM webhook_attempts WHERE attempt >= 2 ORDER BY started_at`)
	if err != nil {
		t.Fatal(err)
	}
	retries, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	if len(retries) == 0 {
		t.Fatalf("no retry recorded of %d received", received)
	}
	// Within any 500 ms (the 1 s window, less up to 500 ms between a check
	// in Redis and the attempt's start on a loaded machine) at most 4
	// retries; over the whole span, allowing the same, at most 4 per
	// started second of the checks' span.
	const jitter = 500 * time.Millisecond
	if span := retries[len(retries)-1].Sub(retries[0]); len(retries) > 4*(int((span+jitter)/time.Second)+1) {
		t.Fatalf("%d retries in %v; the limit is 4/s", len(retries), span)
	}
	for i := range retries {
		n := 0
		for j := i; j >= 0 && retries[i].Sub(retries[j]) < time.Second-jitter; j-- {
			n++
		}
		if n > 4 {
			t.Fatalf("%d retries within %v ending at #%d; the limit is 4/s", n, time.Second-jitter, i)
		}
	}
	if received < 8 {
		t.Fatalf("only %d retries in 2.5 s: the limit starved the consumer", received)
	}
	// Deferral loses nothing: every event still has exactly one pending row.
	if n := db.Count(t, "SELECT count(DISTINCT delivery_id) FROM webhook_outbox WHERE NOT processed"); n != 20 {
		t.Fatalf("%d events pending, want 20", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

func TestCircuitBreakerStopsTrafficThenProbes(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var healthy atomic.Bool
	c := newConsumer(t, func(delivery) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	env := baseEnv(db, c, map[string]string{
		"REDIS_URL": testRedisURL(t, c), "WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "3",
		"WEBHOOK_GATE_TIMEOUT_MS":          loadedGateTimeout,
		"WEBHOOK_CIRCUIT_BREAKER_RESET_MS": "1500", "WEBHOOK_MAX_ATTEMPTS": "1000",
		"WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "20",
	})
	startProcess(t, env)
	startProcess(t, env)
	db.Insert(t, "e", `{}`)
	waitfor.True(t, 20*time.Second, "three failures open the circuit", func() bool { return len(c.deliveries()) >= 3 })
	opened := c.deliveries()[2].At
	waitfor.True(t, 20*time.Second, "the half-open probe", func() bool { return len(c.deliveries()) >= 4 })
	got := c.deliveries()
	// The gaps are measured at the consumer, where a loaded machine adds
	// jitter to each receipt: 1 s of the 1.5 s reset must show.
	const minGap = time.Second
	if gap := got[3].At.Sub(opened); gap < minGap {
		t.Fatalf("a request %v after the circuit opened; want none for 1.5 s", gap)
	}
	healthy.Store(true)
	waitfor.True(t, 20*time.Second, "delivered after a successful probe", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	// Between the opening and the probe, and between probes, never two
	// requests closer than the reset period: at most one probe at a time.
	got = c.deliveries()
	for i := 3; i < len(got); i++ {
		if gap := got[i].At.Sub(got[i-1].At); gap < minGap {
			t.Fatalf("requests %d and %d only %v apart while the circuit was open or half-open", i-1, i, gap)
		}
	}
}

func TestRedisUnreachableDeliveriesContinue(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	w := startInProcess(t, baseEnv(db, c, map[string]string{
		"REDIS_URL": "redis://:n0tlogged@127.0.0.1:1/0", "WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "1",
	}))
	insertTx(t, db, 20)
	waitProcessed(t, db, 20, 20*time.Second)
	if len(c.byID()) != 20 {
		t.Fatalf("delivered %d of 20 with Redis down", len(c.byID()))
	}
	if logs := w.logs.String(); len(logs) == 0 || strings.Contains(logs, "n0tlogged") {
		t.Fatal("the Redis password reached the logs (or nothing was logged)")
	}
}
