package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// The circuit breaker is per endpoint: the one endpoint that fails has its
// circuit opened (keyed by the SHA-256 of its URL) while the other endpoint
// keeps receiving every event; status shows each endpoint's circuit.
func TestCircuitBreakerPerEndpoint(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	failing := newConsumer(t, func(delivery) int { return http.StatusInternalServerError })
	healthy := newConsumer(t, nil)
	redisURL := testRedisURL(t, failing)
	testRedisURL(t, healthy) // cleans up the healthy endpoint's keys too
	addEndpoint(t, db, "failing", failing)
	addEndpoint(t, db, "healthy", healthy)
	startInProcess(t, baseEnv(db, nil, map[string]string{
		"REDIS_URL": redisURL, "WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "3",
		"WEBHOOK_GATE_TIMEOUT_MS":          loadedGateTimeout,
		"WEBHOOK_CIRCUIT_BREAKER_RESET_MS": "600000", "WEBHOOK_MAX_ATTEMPTS": "1000",
		"WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "20",
	}))
	for range 5 {
		enqueue(t, db, "e", `{}`, "")
	}
	opt, _ := redis.ParseURL(redisURL)
	client := redis.NewClient(opt)
	defer client.Close()
	key := func(c *consumer) string {
		sum := sha256.Sum256([]byte(c.srv.URL))
		return "webhook_cb:" + hex.EncodeToString(sum[:])
	}
	waitfor.True(t, 20*time.Second, "the failing endpoint's circuit open", func() bool {
		raw, err := client.Get(context.Background(), key(failing)).Result()
		return err == nil && strings.Contains(raw, `"open"`)
	})
	// While it is open, new events reach the healthy endpoint and not the
	// failing one (a retry that passed its check just before the circuit
	// opened may still arrive).
	before := len(failing.deliveries())
	for range 5 {
		enqueue(t, db, "e", `{}`, "")
	}
	waitfor.True(t, 20*time.Second, "the healthy endpoint served in full", func() bool { return len(healthy.byID()) == 10 })
	if raw, err := client.Get(context.Background(), key(healthy)).Result(); err == nil && strings.Contains(raw, `"open"`) {
		t.Fatalf("the healthy endpoint's circuit opened too: %s", raw)
	}
	if n := len(failing.deliveries()); n > before+2 {
		t.Fatalf("%d requests to the failing endpoint after its circuit opened (%d before)", n-before, before)
	}
	env := map[string]string{"DATABASE_URL": db.URL, "REDIS_URL": redisURL}
	var sb, eb strings.Builder
	code := run(context.Background(), []string{"status"}, func(k string) string { return env[k] }, &sb, &eb)
	out := sb.String()
	if code != 0 || !strings.Contains(lineOf(out, "failing "), "open") || !strings.Contains(lineOf(out, "healthy "), "closed") {
		t.Fatalf("status exit %d:\n%s%s", code, out, eb.String())
	}
	if db.Count(t, "SELECT count(*) FROM webhook_dead_letter") != 0 {
		t.Fatal("a dead letter: the circuit must defer, not drop")
	}
}
