package main

import (
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// Workers that fan events out to three endpoints are SIGKILLed in turn
// while deliveries of fan-outs in flight (no delivery row until their
// outcome, migration 018) are being sent: every event still reaches every
// endpoint, nothing is dead-lettered, and every event ends processed with
// its fan-out of three.
func TestSIGKILLRoundsFanOutLoseNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var mu sync.Mutex
	ok := map[string]map[string]bool{} // endpoint -> delivery ids answered 200
	consumers := map[string]*consumer{}
	for _, name := range []string{"a", "b", "c"} {
		ok[name] = map[string]bool{}
		c := newConsumer(t, flaky(func(d delivery) {
			mu.Lock()
			ok[name][d.ID] = true
			mu.Unlock()
		}))
		addEndpoint(t, db, name, c)
		consumers[name] = c
	}
	const events, rounds = 150, 8
	killRounds(t, db, endpointsOnly(db, killEnv), events, rounds)
	waitfor.True(t, 90*time.Second, "everything delivered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND fanout IS DISTINCT FROM 3"); n != 0 {
		t.Fatalf("%d events not processed with their fan-out of 3", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND fan_to IS NOT NULL"); n == 0 {
		t.Fatal("no event was fanned out in flight")
	}
	mu.Lock()
	defer mu.Unlock()
	sent := 0
	for name, c := range consumers {
		if len(ok[name]) != events {
			t.Errorf("endpoint %s: delivered %d distinct events of %d", name, len(ok[name]), events)
		}
		for _, n := range c.byID() {
			sent += n
		}
	}
	retries := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE attempt > 1")
	again := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND reclaims > 0")
	figures(t, "fan-out to 3: %d events, %d SIGKILLs, %d requests, %d retry rows (503s), lost 0, duplicates %d (events claimed again: %d)",
		events, rounds, sent, retries, sent-3*events-retries, again)
}
