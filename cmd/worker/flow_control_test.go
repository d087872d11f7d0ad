package main

import (
	"context"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/testredis"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// flowEndpoint adds an endpoint for c with `worker endpoints add` and the
// flow flags given.
func flowEndpoint(t *testing.T, db *testdb.DB, name string, c *consumer, flags ...string) {
	t.Helper()
	c.secret = "whsec_" + name + "_flow_secret"
	args := append([]string{"endpoints", "add", "--name", name, "--url", c.srv.URL, "--secret", c.secret}, flags...)
	if code, out := runCommand(t, workerBinary(t), endpointsOnly(db, nil), args...); code != exitOK {
		t.Fatalf("endpoints add %v: exit %d: %s", flags, code, out)
	}
}

// busiestSecond is the most requests c received within any one second.
func busiestSecond(c *consumer) int {
	var at []time.Time
	for _, d := range c.deliveries() {
		at = append(at, d.At)
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	most, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= time.Second {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// insertEvents inserts n events at once.
func insertEvents(t *testing.T, db *testdb.DB, n int) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload)
		SELECT 'flow.test', jsonb_build_object('n', g) FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
}

// answeredCount is how many requests c has answered: cheap enough to poll
// while it serves, unlike a copy of every delivery.
func answeredCount(c *consumer) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answered
}

// allOK fails the test unless c received n distinct deliveries, each
// answered 2xx and well signed, none twice.
func allOK(t *testing.T, c *consumer, n int) {
	t.Helper()
	for _, d := range c.deliveries() {
		if d.Status != http.StatusOK || !d.SignatureOK {
			t.Fatalf("delivery %s: status %d, signature ok %v", d.ID, d.Status, d.SignatureOK)
		}
	}
	deliveredOnceEach(t, c, n)
}

// Three worker processes hold one endpoint to its rate and its most in
// flight, with Redis up, absent, or stopped mid-run: the limits live in
// the database.
//
// Not parallel: it runs before the package's parallel tests start, so that
// the consumer, whose receipt times it judges, is not starved by them.
func TestFlowControlAcrossWorkers(t *testing.T) {
	const events = 1000
	for _, tc := range []struct {
		name  string
		flags []string
		// slow is how long the consumer takes to answer.
		slow      time.Duration
		stopRedis bool
	}{
		{name: "rate 50/s burst 10", flags: []string{"--rate", "50/s", "--burst", "10"}},
		{name: "at most 4 in flight", flags: []string{"--max-in-flight", "4"}, slow: 5 * time.Millisecond},
		{name: "both, Redis stopped mid-run", flags: []string{"--rate", "50/s", "--burst", "10", "--max-in-flight", "4"},
			slow: 5 * time.Millisecond, stopRedis: true},
	} {
		// One after the other: nine workers and three consumers at once
		// would measure the machine's scheduling more than the limits.
		t.Run(tc.name, func(t *testing.T) {
			db := testdb.New(t)
			rs := testredis.Start(t)
			c := newConsumer(t, func(delivery) int {
				time.Sleep(tc.slow)
				return http.StatusOK
			})
			flowEndpoint(t, db, "limited", c, tc.flags...)
			// A request timeout far beyond any stall of the consumer (this
			// process, beside the package's other tests): a request it
			// answers late is not sent again, so "once each" stays the
			// subject.
			env := endpointsOnly(db, map[string]string{"REDIS_URL": rs.URL(), "WEBHOOK_CONCURRENCY": "50", "WEBHOOK_TIMEOUT_MS": "60000"})
			for range 3 {
				startProcess(t, env)
			}
			began := time.Now()
			insertEvents(t, db, events)
			if tc.stopRedis {
				waitfor.True(t, 60*time.Second, "a third delivered", func() bool { return answeredCount(c) >= events/3 })
				rs.Kill()
			}
			waitfor.True(t, 3*time.Minute, "every event delivered", func() bool { return answeredCount(c) >= events })
			took := time.Since(began)
			allOK(t, c, events)
			busiest := busiestSecond(c)
			c.mu.Lock()
			peak := c.peak
			c.mu.Unlock()
			figures(t, "flow control, 3 workers, %s: %d events in %v, busiest second %d, most in flight %d",
				tc.name, events, took.Round(100*time.Millisecond), busiest, peak)
			// The rate, judged by what a busy machine cannot shorten: from
			// the insert to the last answer, the burst at once and the
			// rest at 50 a second take at least (1000 - 10) / 50 s. The
			// busiest second at the consumer is a figure: a consumer the
			// machine stalls answers a second's requests in a burst (the
			// bench, on a quiet machine, judges it).
			if least := time.Duration(events-10) * time.Second / 50; slices.Contains(tc.flags, "--rate") && took < least {
				t.Fatalf("1,000 deliveries in %v at 50/s with a burst of 10: want at least %v", took, least)
			}
			if slices.Contains(tc.flags, "--max-in-flight") {
				if peak > 4 {
					t.Fatalf("the consumer saw %d requests at once, want at most 4", peak)
				}
			}
		})
	}
}

// A 429 with Retry-After pauses its endpoint for every worker: no request
// reaches it until then, the row that got it is retried after, and another
// endpoint's deliveries go on meanwhile.
func TestConsumerPauseHoldsEveryWorker(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var answered atomic.Int64 // when the 429 was answered, unix nanoseconds
	paused := newConsumer(t, func(delivery) int {
		if answered.Load() == 0 {
			answered.Store(time.Now().UnixNano())
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	paused.respondHeader = map[string]string{"Retry-After": "3"}
	other := newConsumer(t, nil)
	flowEndpoint(t, db, "pausing", paused)
	flowEndpoint(t, db, "other", other)
	// Retry-After is capped by WEBHOOK_BACKOFF_MAX_MS (the harness's is short).
	env := endpointsOnly(db, map[string]string{"WEBHOOK_BACKOFF_MAX_MS": "10000"})
	for range 3 {
		startProcess(t, env)
	}
	insertEvents(t, db, 1)
	waitfor.True(t, 30*time.Second, "the 429", func() bool { return answered.Load() != 0 })
	waitfor.True(t, 10*time.Second, "the pause written", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_flow WHERE paused_until > now()") == 1
	})
	insertEvents(t, db, 20)
	waitfor.True(t, 30*time.Second, "the other endpoint's 21 deliveries", func() bool { return answeredCount(other) >= 21 })
	sawOther := time.Now()
	waitfor.True(t, 30*time.Second, "the paused endpoint's 21 deliveries and the retry", func() bool { return answeredCount(paused) >= 22 })
	at := time.Unix(0, answered.Load())
	for _, d := range paused.deliveries() {
		if d.At.After(at) && d.At.Before(at.Add(3*time.Second)) {
			t.Fatalf("a request %v after the 429 that asked for 3 s", d.At.Sub(at).Round(time.Millisecond))
		}
	}
	if !sawOther.Before(at.Add(3 * time.Second)) {
		t.Fatalf("the other endpoint's deliveries were held with the pause: done %v after the 429", sawOther.Sub(at))
	}
	if n := len(paused.deliveries()); n != 22 {
		t.Fatalf("paused endpoint: %d requests, want 22 (the 429, its retry, 20 more)", n)
	}
}
