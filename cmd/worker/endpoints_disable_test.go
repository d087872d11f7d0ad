package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// scheduledFor inserts n deliveries to endpoint id, due in an hour: pending
// work that a disable must move to the dead-letter table.
func scheduledFor(t *testing.T, db *testdb.DB, id string, n int) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
		SELECT 'later', jsonb_build_object('n', g), $1, now() + interval '1 hour' FROM generate_series(1, $2) g`, id, n)
	if err != nil {
		t.Fatal(err)
	}
}

// recoverEndpoint enables name and replays its dead letters, as an operator
// would, and checks the commands say so.
func recoverEndpoint(t *testing.T, db *testdb.DB, name string, want int) {
	t.Helper()
	if code, out, errs := ops(t, db, "endpoints", "enable", name); code != 0 {
		t.Fatalf("enable: exit %d %s%s", code, out, errs)
	}
	code, out, errs := ops(t, db, "dlq", "replay", "--endpoint", name)
	if code != 0 || !strings.Contains(out, "replayed "+strconv.Itoa(want)) {
		t.Fatalf("replay: exit %d %s%s", code, out, errs)
	}
}

// An endpoint that answers 410 Gone is disabled at once; its pending
// deliveries move to the dead-letter table with the reason; enabling it and
// replaying its dead letters delivers every one. Other endpoints carry on.
func TestGoneEndpointDisabledAndRecovered(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var gone atomic.Bool
	gone.Store(true)
	flaky := newConsumer(t, func(delivery) int {
		if gone.Load() {
			return http.StatusGone
		}
		return http.StatusOK
	})
	other := newConsumer(t, nil)
	id := addEndpoint(t, db, "flaky", flaky)
	addEndpoint(t, db, "other", other)
	scheduledFor(t, db, id, 5)
	w := startInProcess(t, baseEnv(db, nil, nil))
	base := startedWorker(t, w.logs)

	enqueue(t, db, "order.created", `{"n":0}`, "")
	waitfor.True(t, 20*time.Second, "endpoint disabled after 410", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'flaky' AND NOT enabled AND disabled_reason = '410 Gone'") == 1 &&
			db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1", id) == 6
	})
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1 AND last_error = 'endpoint flaky disabled: 410 Gone'", id); n != 5 {
		t.Fatalf("%d pending deliveries dead-lettered with the reason, want 5", n)
	}
	waitfor.True(t, 20*time.Second, "other endpoint served", func() bool { return len(other.deliveries()) == 1 })
	_, metrics := httpGet(base + "/metrics")
	if !strings.Contains(metrics, `fluxora_webhook_endpoints_disabled_total{reason="gone"} 1`) {
		t.Fatalf("metrics:\n%s", grepLines(metrics, "disabled"))
	}
	if !strings.Contains(w.logs.String(), "410 Gone") {
		t.Fatalf("no log of the disable")
	}

	gone.Store(false)
	recoverEndpoint(t, db, "flaky", 6)
	// The scheduled ones were due in an hour; replayed, they are due now.
	waitfor.True(t, 20*time.Second, "every dead letter delivered after replay", func() bool { return len(flaky.byID()) == 6 })
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d dead letters left", n)
	}
}

// An endpoint whose every attempt has failed for
// WEBHOOK_ENDPOINT_DISABLE_AFTER is disabled by the worker, and recovered in
// full by enable and replay.
func TestFailingEndpointDisabledAfterTime(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var down atomic.Bool
	down.Store(true)
	c := newConsumer(t, func(delivery) int {
		if down.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	id := addEndpoint(t, db, "down", c)
	scheduledFor(t, db, id, 3)
	w := startInProcess(t, baseEnv(db, nil, map[string]string{
		"WEBHOOK_ENDPOINT_DISABLE_AFTER": "1m",
		"WEBHOOK_BACKOFF_BASE_MS":        "60000", // the retry waits: pending, not due
		"WEBHOOK_BACKOFF_MAX_MS":         "60000",
	}))
	enqueue(t, db, "e", `{}`, "")
	waitfor.True(t, 20*time.Second, "failure recorded on the endpoint", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'down' AND failing_since IS NOT NULL AND last_status = 500 AND last_error = 'http 500'") == 1
	})
	// A minute of failures, without waiting for it.
	if _, err := db.Pool.Exec(context.Background(), "UPDATE webhook_endpoints SET failing_since = now() - interval '2 minutes' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 40*time.Second, "failing endpoint disabled", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE id = $1 AND NOT enabled AND disabled_reason LIKE 'every attempt failed since %'", id) == 1 &&
			db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1", id) == 4
	})
	if !strings.Contains(w.logs.String(), "down") {
		t.Fatalf("no log naming the endpoint")
	}
	down.Store(false)
	recoverEndpoint(t, db, "down", 4)
	waitfor.True(t, 20*time.Second, "every dead letter delivered after replay", func() bool {
		n := 0
		for _, d := range c.deliveries() {
			if d.Status == http.StatusOK {
				n++
			}
		}
		return n == 4
	})
	// A success ends the failure run.
	waitfor.True(t, 20*time.Second, "failure run cleared", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE id = $1 AND failing_since IS NULL", id) == 1
	})
}
