package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

func TestDeliversEveryEventSigned(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	startInProcess(t, baseEnv(db, c, nil))
	const n = 50
	for i := range n {
		db.Insert(t, "stream.updated", fmt.Sprintf(`{"stream": %d, "note": "caf\u00e9"}`, i))
	}
	waitProcessed(t, db, n, 20*time.Second)
	got := c.deliveries()
	if len(got) != n {
		t.Fatalf("consumer got %d requests, want %d", len(got), n)
	}
	var ids []string
	for _, d := range got {
		if !d.SignatureOK || d.Event != "stream.updated" || d.Attempt != 1 {
			t.Fatalf("bad delivery %+v", d)
		}
		ts, _ := strconv.ParseInt(d.Timestamp, 10, 64)
		if diff := time.Since(time.Unix(ts, 0)); diff < -2*time.Second || diff > 10*time.Second {
			t.Fatalf("timestamp %s is %v off", d.Timestamp, diff)
		}
		ids = append(ids, d.ID)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed AND delivery_id::text = ANY($1)", ids); n != len(ids) {
		t.Fatalf("delivery ids matching rows: %d of %d", n, len(ids))
	}
	// The body is the stored JSON text, byte for byte.
	var want string
	if err := db.Pool.QueryRow(context.Background(), "SELECT payload::text FROM webhook_outbox WHERE delivery_id = $1", got[0].ID).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if string(got[0].Body) != want {
		t.Fatalf("body %q, want %q", got[0].Body, want)
	}
}

func TestRetriesKeepDeliveryIDAndRaiseAttempt(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, func(d delivery) int {
		if d.Attempt < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	startInProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_MAX_ATTEMPTS": "5"}))
	db.Insert(t, "e", `{"x":1}`)
	waitfor.True(t, 20*time.Second, "third attempt delivered", func() bool { return len(c.deliveries()) >= 3 })
	waitfor.True(t, 20*time.Second, "nothing pending", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	got := c.deliveries()
	if len(got) != 3 {
		t.Fatalf("got %d requests, want 3", len(got))
	}
	for i, d := range got {
		if d.ID != got[0].ID || d.Attempt != i+1 || !d.SignatureOK {
			t.Fatalf("request %d: %+v (first id %s)", i, d, got[0].ID)
		}
	}
	if got[1].Signature == got[0].Signature && got[1].Timestamp != got[0].Timestamp {
		t.Fatal("signature not recomputed for the new timestamp")
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1", got[0].ID); n != 3 {
		t.Fatalf("rows for the event = %d, want 3 (one per attempt)", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("dead letters = %d", n)
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		status   int
		attempts int
		errLike  string
	}{
		{"permanent 4xx at once", http.StatusBadRequest, 1, "400"},
		{"redirect is permanent", http.StatusFound, 1, "302"},
		{"exhausted retries", http.StatusInternalServerError, 3, "gave up after 3 attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			c := newConsumer(t, func(delivery) int { return tc.status })
			startInProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_MAX_ATTEMPTS": "3"}))
			db.Insert(t, "invoice.paid", `{"amount": 10}`)
			waitfor.True(t, 20*time.Second, "dead letter", func() bool {
				return db.Count(t, "SELECT count(*) FROM webhook_dead_letter") == 1
			})
			var attempts, status int
			var lastErr, event, payload string
			err := db.Pool.QueryRow(context.Background(),
				"SELECT attempts, last_status, last_error, event_type, payload::text FROM webhook_dead_letter").
				Scan(&attempts, &status, &lastErr, &event, &payload)
			if err != nil {
				t.Fatal(err)
			}
			if attempts != tc.attempts || status != tc.status || !strings.Contains(lastErr, tc.errLike) ||
				event != "invoice.paid" || payload != `{"amount": 10}` {
				t.Fatalf("dead letter: attempts %d status %d err %q event %q payload %q", attempts, status, lastErr, event, payload)
			}
			if got := len(c.deliveries()); got != tc.attempts {
				t.Fatalf("consumer saw %d requests, want %d", got, tc.attempts)
			}
			if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"); n != 0 {
				t.Fatalf("%d rows still pending", n)
			}
		})
	}
}

// Producers race: each inserts inside a transaction that keeps working
// afterwards, so commits interleave with the notifier's. No event may wait
// for the (one minute) poll.
func TestRacingProducersNeverWaitForThePoll(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	startInProcess(t, baseEnv(db, c, nil))
	const producers, each = 8, 40
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				tx, err := db.Pool.Begin(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				_, err = tx.Exec(context.Background(), "INSERT INTO webhook_outbox (event_type, payload) VALUES ('race', $1)",
					fmt.Sprintf(`{"p":%d,"i":%d}`, p, i))
				if err == nil {
					_, err = tx.Exec(context.Background(), "SELECT pg_sleep($1)", float64((p*7+i*13)%5)/1000)
				}
				if err == nil {
					err = tx.Commit(context.Background())
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Well under the 60 s poll: every event arrives within 5 s of the last commit.
	waitfor.True(t, 5*time.Second, "every racing event delivered without the poll", func() bool {
		return len(c.deliveries()) >= producers*each
	})
	if got := len(c.byID()); got != producers*each {
		t.Fatalf("distinct deliveries %d, want %d", got, producers*each)
	}
}

func TestScheduledRetryFiresWithoutThePoll(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, func(d delivery) int {
		if d.Attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	startInProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_BACKOFF_BASE_MS": "300", "WEBHOOK_BACKOFF_MAX_MS": "300"}))
	db.Insert(t, "e", `{}`)
	waitfor.True(t, 10*time.Second, "retry delivered long before the 60 s poll", func() bool { return len(c.deliveries()) == 2 })
	got := c.deliveries()
	if gap := got[1].At.Sub(got[0].At); gap < 200*time.Millisecond {
		t.Fatalf("retry after %v: backoff not applied", gap)
	}
}
