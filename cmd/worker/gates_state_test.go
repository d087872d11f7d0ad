package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// No gate outcome makes rows: a deferral moves the row itself. Garbage in
// the breaker's Redis key (resetAt 1e300 once turned 10 events into
// thousands of rows in seconds, each deferred by a wrapped 1 ms) is treated
// as absent, so the 10 are delivered at once (fail-open) and counted; a
// valid open circuit defers the 10 (however often) until its reset, then
// delivers them: still 10 rows.
func TestBreakerStateInRedisMakesNoRows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		state   func() string
		invalid bool
	}{
		{"resetAt 1e300 fails open", func() string { return `{"state":"open","failures":3,"resetAt":1e300}` }, true},
		{"resetAt 1e18 fails open", func() string { return `{"state":"open","failures":3,"resetAt":1e18}` }, true},
		{"a valid open circuit defers, then delivers", func() string {
			return fmt.Sprintf(`{"state":"open","failures":3,"resetAt":%d}`, time.Now().Add(1500*time.Millisecond).UnixMilli())
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			c := newConsumer(t, nil)
			ru := testRedisURL(t, c)
			opt, err := redis.ParseURL(ru)
			if err != nil {
				t.Fatal(err)
			}
			client := redis.NewClient(opt)
			t.Cleanup(func() { client.Close() })
			p := startProcess(t, baseEnv(db, c, map[string]string{
				"REDIS_URL": ru, "WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "3", "WEBHOOK_CIRCUIT_BREAKER_RESET_MS": "1500",
				"WEBHOOK_GATE_TIMEOUT_MS": loadedGateTimeout,
			}))
			base := startedWorker(t, p.logs)
			sum := sha256.Sum256([]byte(c.srv.URL))
			if err := client.Set(context.Background(), "webhook_cb:"+hex.EncodeToString(sum[:]), tc.state(), time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			insertTx(t, db, 10)
			most := 0
			waitfor.True(t, 30*time.Second, "the 10 events delivered", func() bool {
				n := db.Count(t, "SELECT count(*) FROM webhook_outbox")
				most = max(most, n)
				if n > 10 {
					t.Fatalf("%d outbox rows for 10 events: a gate outcome made rows", n)
				}
				return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed") == 10
			})
			deliveredOnceEach(t, c, 10)
			if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 10 {
				t.Fatalf("%d outbox rows at the end, want 10", n)
			}
			if n := db.Count(t, "SELECT count(*) FROM webhook_attempts"); n != 10 {
				t.Fatalf("%d attempts recorded, want 10 (a deferral is no attempt)", n)
			}
			invalid := metricValue(t, base, `fluxora_webhook_gate_state_invalid_total{gate="breaker"}`)
			deferred := metricValue(t, base, `fluxora_webhook_gate_deferrals_total{reason="circuit_open"}`) +
				metricValue(t, base, `fluxora_webhook_gate_deferrals_total{reason="probe_busy"}`)
			t.Logf("rows: at most %d; invalid states %v; deferrals %v", most, invalid, deferred)
			if tc.invalid && (invalid < 1 || deferred != 0) {
				t.Fatalf("garbage state: invalid_total %v (want >= 1), deferrals %v (want 0)", invalid, deferred)
			}
			if !tc.invalid && invalid != 0 {
				t.Fatalf("valid open state counted invalid: %v", invalid)
			}
		})
	}
}
