package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// attemptLines runs `worker attempts ID --json` and returns the attempts
// and the state.
func attemptLines(t *testing.T, db *testdb.DB, id string) ([]attempt, deliveryState) {
	t.Helper()
	code, out, errs := ops(t, db, "attempts", id, "--json")
	if code != exitOK {
		t.Fatalf("worker attempts %s: exit %d\n%s", id, code, errs)
	}
	var got attemptsJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.DeliveryID != id || got.Attempts == nil {
		t.Fatalf("worker attempts %s --json: %v\n%s", id, err, out)
	}
	return got.Attempts, got.State
}

// summary is an attempt list as "status/class" items.
func summary(list []attempt) string {
	var parts []string
	for _, a := range list {
		status, class := "-", "-"
		if a.Status != nil {
			status = fmt.Sprint(*a.Status)
		}
		if a.ErrorClass != nil {
			class = *a.ErrorClass
		}
		parts = append(parts, fmt.Sprintf("%d:%s/%s", a.Attempt, status, class))
	}
	return strings.Join(parts, " ")
}

// Every attempt is recorded with its outcome: a delivery retried twice and
// then delivered; one refused for good (dead letter), replayed and
// delivered; one whose endpoint never answers (no status). `worker
// attempts` prints each history and the delivery's state; `worker dlq list`
// the last status and error.
func TestAttemptHistory(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var mu sync.Mutex
	refuse := true
	seen := map[string]int{}
	c := newConsumer(t, func(d delivery) int {
		mu.Lock()
		defer mu.Unlock()
		seen[d.Event]++
		switch {
		case d.Event == "flaky" && seen[d.Event] <= 2:
			return http.StatusServiceUnavailable
		case d.Event == "refused" && refuse:
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	// A port nothing listens on: every attempt fails without a response.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/hook"
	ln.Close()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret, event_types) VALUES ('gone', $1, 's', '{silent}')`, closed); err != nil {
		t.Fatal(err)
	}
	startInProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_MAX_ATTEMPTS": "3"}))

	flaky := enqueue(t, db, "flaky", `{"n": 1}`, "")
	refused := enqueue(t, db, "refused", `{"n": 2}`, "")
	silent := enqueue(t, db, "silent", `{"n": 3}`, "")
	var silentDelivery string
	waitfor.True(t, 30*time.Second, "flaky delivered, refused and silent dead-lettered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_dead_letter") == 2 &&
			db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	if err := db.Pool.QueryRow(context.Background(), `SELECT delivery_id::text FROM webhook_dead_letter WHERE event_type = 'silent'`).Scan(&silentDelivery); err != nil {
		t.Fatal(err)
	}

	list, st := attemptLines(t, db, flaky)
	if got := summary(list); got != "1:503/retryable 2:503/retryable 3:200/-" || st.State != "delivered" {
		t.Fatalf("flaky: %s, state %+v", got, st)
	}
	if list[0].Endpoint != "default" || list[0].Error == nil || *list[0].Error != "http 503" || list[2].Error != nil {
		t.Fatalf("flaky: %+v", list)
	}
	for i := 1; i < len(list); i++ {
		if list[i].StartedAt.Before(list[i-1].StartedAt) || list[i].DurationMS < 0 {
			t.Fatalf("flaky: attempts out of order or negative durations: %+v", list)
		}
	}
	list, st = attemptLines(t, db, refused)
	if got := summary(list); got != "1:400/permanent" || st.State != "dead_letter" || st.Reason != "http 400" {
		t.Fatalf("refused: %s, state %+v", got, st)
	}
	list, st = attemptLines(t, db, silentDelivery)
	if got := summary(list); got != "1:-/retryable 2:-/retryable 3:-/retryable" || st.State != "dead_letter" || list[0].Endpoint != "gone" {
		t.Fatalf("silent: %s, state %+v, %+v", got, st, list)
	}
	// The event row of the silent event was fanned out, not delivered.
	if _, st := attemptLines(t, db, silent); st.State != "delivered" && st.State != "fanned_out" {
		t.Fatalf("silent event row: state %+v", st)
	}

	// dlq list shows the last status and error.
	code, out, _ := ops(t, db, "dlq", "list")
	if code != exitOK || !strings.Contains(lineOf(out, refused), "400") || !strings.Contains(lineOf(out, refused), "http 400") ||
		!strings.Contains(lineOf(out, silentDelivery), "gave up after 3 attempts") {
		t.Fatalf("dlq list:\n%s", out)
	}

	// Replayed, the history goes on: attempt 1 again, delivered.
	mu.Lock()
	refuse = false
	mu.Unlock()
	if code, out, errs := ops(t, db, "dlq", "replay", refused); code != exitOK {
		t.Fatalf("replay: exit %d %s %s", code, out, errs)
	}
	waitfor.True(t, 30*time.Second, "the replay delivered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_attempts WHERE delivery_id = $1", refused) == 2
	})
	list, st = attemptLines(t, db, refused)
	if got := summary(list); got != "1:400/permanent 1:200/-" || st.State != "delivered" {
		t.Fatalf("refused after replay: %s, state %+v", got, st)
	}

	// One row per request the consumers saw (the closed port saw none).
	if n, want := db.Count(t, "SELECT count(*) FROM webhook_attempts WHERE endpoint_id IS NULL"), len(c.deliveries()); n != want {
		t.Fatalf("%d attempts recorded for the default endpoint, the consumer saw %d requests", n, want)
	}

	// The table view, and the refusals.
	code, out, _ = ops(t, db, "attempts", flaky)
	if code != exitOK || !strings.Contains(out, "3 attempts recorded") || !strings.Contains(out, "now: delivered") ||
		!strings.Contains(out, "http 503") {
		t.Fatalf("attempts table: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"attempts"}, exitUsage, "exactly one DELIVERY_ID"},
		{[]string{"attempts", "not-a-uuid"}, exitUsage, `"not-a-uuid" is not a delivery id`},
		{[]string{"attempts", "44444444-4444-4444-8444-444444444444"}, exitFailure, "nothing is known of delivery 44444444-4444-4444-8444-444444444444"},
	} {
		code, _, errs := ops(t, db, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d %q, want %d %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}
