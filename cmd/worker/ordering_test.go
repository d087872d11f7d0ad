package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// orderedEvent is the payload of the ordering test's events: key k's i-th
// event (k -1: unordered).
type orderedEvent struct {
	K int `json:"k"`
	I int `json:"i"`
}

// Two workers deliver 40 keys × 15 events interleaved with unordered
// events to a consumer that fails the first attempt of every 4th event and
// answers after a random delay, while one worker is SIGKILLed mid-run and
// one more key's head fails until everything else has arrived. For every
// key, no request for event i+1 arrives before event i was answered 2xx,
// each request carries the key and its sequence (i+1), nothing is lost,
// and the failing head holds back no other key.
func TestOrderedDeliveryAcrossWorkersAndSIGKILL(t *testing.T) {
	t.Parallel()
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		orderedRun(t, db, func(c *consumer, o map[string]string) map[string]string { return baseEnv(db, c, o) })
	})
	// The workers' statements through PgBouncer in transaction mode, the
	// listener direct (README, "Behind PgBouncer").
	t.Run("behind PgBouncer", func(t *testing.T) {
		t.Parallel()
		s := setupBounced(t)
		orderedRun(t, s.db, s.env)
	})
}

// orderedRun is TestOrderedDeliveryAcrossWorkersAndSIGKILL on db, its
// workers configured by env.
func orderedRun(t *testing.T, db *testdb.DB, env func(*consumer, map[string]string) map[string]string) {
	const keys, perKey, unordered, poison = 40, 15, 150, 40
	var release atomic.Bool
	c := newConsumer(t, func(d delivery) int {
		var ev orderedEvent
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			return http.StatusBadRequest
		}
		time.Sleep(time.Duration(rand.IntN(8)) * time.Millisecond)
		switch {
		case ev.K == poison && ev.I == 0 && !release.Load():
			return http.StatusServiceUnavailable
		case ev.I%4 == 3 && d.Attempt == 1:
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	workerEnv := env(c, map[string]string{"WEBHOOK_TIMEOUT_MS": "2000", "WEBHOOK_MAX_ATTEMPTS": "1000",
		"WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "50"})
	first := startProcess(t, workerEnv)
	startedWorker(t, first.logs)
	second := startProcess(t, workerEnv)
	startedWorker(t, second.logs)

	// Keys' events in rounds (event i of every key, then i+1), one
	// transaction each, unordered events between them; the poison key
	// (40) has 3 events.
	insert := func(k, i int) {
		var key any
		if k >= 0 {
			key = "key-" + strconv.Itoa(k)
		}
		b, _ := json.Marshal(orderedEvent{K: k, I: i})
		if _, err := db.Pool.Exec(context.Background(),
			`INSERT INTO webhook_outbox (event_type, payload, ordering_key) VALUES ('order.step', $1, $2)`, string(b), key); err != nil {
			t.Error(err)
		}
	}
	u := 0
	for i := range perKey {
		for k := range keys {
			insert(k, i)
			if (i*keys+k)%4 == 0 && u < unordered {
				insert(-1, u)
				u++
			}
		}
		if i < 3 {
			insert(poison, i)
		}
		if i == perKey/3 {
			// A third in: one worker dies with rows in flight.
			if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := keys*perKey + u
	waitfor.True(t, 90*time.Second, "every event but the poison key's delivered", func() bool {
		return deliveredEvents(c, poison) >= total
	})
	if got := answered(c, poison, 0); got {
		t.Fatal("the poison key's head was answered 2xx before its release")
	}
	release.Store(true)
	waitfor.True(t, 60*time.Second, "the poison key's events delivered", func() bool {
		return answered(c, poison, 2)
	})

	checkOrder(t, c.deliveries(), keys+1)
	// The last answers' outcomes are written a moment after the answers.
	waitfor.True(t, 30*time.Second, "no row left pending", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	figures(t, "ordering: %d keyed events (41 keys) and %d unordered, 2 workers, one SIGKILLed: %d requests, order kept", keys*perKey+3, u,
		len(c.deliveries()))
}

// deliveredEvents counts the distinct events answered 2xx, but those of
// key skip.
func deliveredEvents(c *consumer, skip int) int {
	seen := map[orderedEvent]bool{}
	for _, d := range c.deliveries() {
		var ev orderedEvent
		if d.Status/100 == 2 && json.Unmarshal(d.Body, &ev) == nil && ev.K != skip {
			seen[ev] = true
		}
	}
	return len(seen)
}

// answered reports whether event i of key k was answered 2xx.
func answered(c *consumer, k, i int) bool {
	for _, d := range c.deliveries() {
		var ev orderedEvent
		if d.Status/100 == 2 && json.Unmarshal(d.Body, &ev) == nil && ev == (orderedEvent{k, i}) {
			return true
		}
	}
	return false
}

// checkOrder asserts, for every key below keys, that each request for
// event i+1 arrived after event i was first answered 2xx, and that every
// request carries the key and the sequence i+1.
func checkOrder(t *testing.T, got []delivery, keys int) {
	t.Helper()
	type req struct {
		i        int
		at, done time.Time
		ok       bool
	}
	byKey := map[int][]req{}
	for _, d := range got {
		var ev orderedEvent
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			t.Fatalf("a request's body: %v", err)
		}
		if ev.K < 0 {
			if d.Key != "" {
				t.Errorf("an unordered event carried the key %q", d.Key)
			}
			continue
		}
		if want := fmt.Sprintf("key-%d", ev.K); d.Key != want || d.Seq != int64(ev.I+1) {
			t.Errorf("event %d of key %d carried key %q sequence %d, want %q %d", ev.I, ev.K, d.Key, d.Seq, want, ev.I+1)
		}
		byKey[ev.K] = append(byKey[ev.K], req{ev.I, d.At, d.Answered, d.Status/100 == 2})
	}
	if len(byKey) != keys {
		t.Fatalf("requests for %d keys, want %d", len(byKey), keys)
	}
	for k, reqs := range byKey {
		firstOK := map[int]time.Time{}
		for _, r := range reqs {
			if r.ok && (firstOK[r.i].IsZero() || r.done.Before(firstOK[r.i])) {
				firstOK[r.i] = r.done
			}
		}
		sort.Slice(reqs, func(a, b int) bool { return reqs[a].at.Before(reqs[b].at) })
		for _, r := range reqs {
			if r.i == 0 {
				continue
			}
			prev, ok := firstOK[r.i-1]
			if !ok || r.at.Before(prev) {
				t.Fatalf("key %d: a request for event %d arrived at %s, before event %d was answered 2xx (%v)",
					k, r.i, r.at.Format(time.RFC3339Nano), r.i-1, prev.Format(time.RFC3339Nano))
			}
		}
	}
}

// `worker status` shows the rows waiting behind their key and the blocked
// keys per endpoint, in the table and in JSON.
func TestStatusShowsBlockedKeys(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	var id string
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret)
		VALUES ('shop', $1, $2) RETURNING id::text`, c.srv.URL+"/shop", testSecret).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// Two keys of three rows each; order-1's head failed, its retry is an
	// hour away: one blocked key, four rows waiting.
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, ordering_key)
		SELECT 'order.paid', '{}', $1, 'order-' || (g % 2) FROM generate_series(1, 6) g ORDER BY g`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(context.Background(), `UPDATE webhook_outbox SET created_at = now() + interval '1 hour'
		WHERE NOT processed AND ordering_key = 'order-1' AND NOT held`); err != nil {
		t.Fatal(err)
	}
	code, out, errs := ops(t, db, "status")
	if code != 0 || !regexp.MustCompile(`shop\s+enabled\s+1\s+0\s+1\s+4\s+1 \(oldest `).MatchString(out) ||
		!strings.Contains(out, "waiting behind their ordering key") {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = ops(t, db, "status", "--json")
	if code != 0 || !strings.Contains(out, `"waiting_for_key":4`) || !strings.Contains(out, `"blocked_keys":1`) {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errs)
	}
	// A worker's gauges: read at its start, order-1 blocked (order-0's
	// rows are delivered meanwhile, order-1's head an hour away).
	w := startInProcess(t, endpointsOnly(db, nil))
	base := metricsBase(t, w.logs)
	waitfor.True(t, 20*time.Second, "the blocked-keys gauge", func() bool {
		v, err := scrapeMetric(base, `fluxora_webhook_ordering_blocked_keys{endpoint="shop"}`)
		return err == nil && v == 1
	})
	if v := metricValue(t, base, `fluxora_webhook_ordering_blocked_oldest_seconds{endpoint="shop"}`); v <= 0 {
		t.Fatalf("oldest blocked %v s", v)
	}
}

// `worker dlq list` shows a dead letter's key and sequence, and whether
// the key moved on without it or waits for it.
func TestDLQListShowsKeys(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_dead_letter
		(delivery_id, event_type, payload, attempts, last_error, ordering_key, ordering_seq, order_broken)
		VALUES (gen_random_uuid(), 'order.paid', '{}', 3, 'http 500', 'order-7', 3, true),
		       (gen_random_uuid(), 'order.paid', '{}', 3, 'http 500', 'order-8', 1, false),
		       (gen_random_uuid(), 'order.paid', '{}', 3, 'http 500', NULL, NULL, false)`); err != nil {
		t.Fatal(err)
	}
	code, out, errs := ops(t, db, "dlq", "list")
	if code != 0 || !strings.Contains(out, "order-7 #3 (order broken)") || !strings.Contains(out, "order-8 #1 (holds the key)") {
		t.Fatalf("dlq list: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = ops(t, db, "dlq", "list", "--json")
	if code != 0 || !strings.Contains(out, `"ordering_key":"order-7","sequence":3,"order_broken":true`) ||
		strings.Count(out, `"ordering_key"`) != 2 {
		t.Fatalf("dlq list --json: exit %d\n%s%s", code, out, errs)
	}
}
