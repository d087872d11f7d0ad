package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// Every connection of the worker's pool is cut while a request is in
// flight, between the claim and the record: the outcome is written on a new
// connection, so the event is sent once and recorded once.
func TestConnectionCutBetweenClaimAndRecord(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var cut atomic.Bool
	c := newConsumer(t, func(delivery) int {
		if cut.CompareAndSwap(false, true) {
			_, _ = db.Pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = 'fluxora-webhook-worker'`)
		}
		return http.StatusOK
	})
	startInProcess(t, baseEnv(db, c, nil))
	db.Insert(t, "e", `{"n":1}`)
	waitfor.True(t, 20*time.Second, "delivered and recorded", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	ids := c.byID()
	if len(ids) != 1 {
		t.Fatalf("events %v", ids)
	}
	for id, n := range ids {
		if n != 1 {
			t.Fatalf("delivery %s sent %d times; the outcome should have been written on a new connection", id, n)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	figures(t, "connections cut between claim and record: sent once, recorded once, lost 0")
}

// No transaction stays open across a request: while a slow consumer holds
// the requests, none of the worker's sessions is idle in a transaction
// (which would hold back vacuum), and a server
// idle_in_transaction_session_timeout far below the request time changes
// nothing.
func TestNoTransactionOpenAcrossRequests(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(context.Background(), "ALTER DATABASE "+db.Name+" SET idle_in_transaction_session_timeout = '100ms'"); err != nil {
		t.Fatal(err)
	}
	c, release := holdingConsumer(t)
	// A request timeout (and so a lease) far beyond the sampling, which a
	// loaded machine stretches: the held requests must not outlive their
	// leases, or their rows are taken over and sent twice.
	startInProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_TIMEOUT_MS": "60000"}))
	insertTx(t, db, 5)
	waitArrivals(t, c, 5)
	for range 20 { // sampled while the five requests are held
		if n := db.Count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name LIKE 'fluxora-webhook-%' AND state LIKE 'idle in transaction%'`); n != 0 {
			t.Fatalf("%d worker sessions idle in a transaction during the requests", n)
		}
	}
	release()
	waitProcessed(t, db, 5, 20*time.Second)
	deliveredOnceEach(t, c, 5)
}

// Rounds of SIGKILL at random moments with three workers and a heavy-tailed
// consumer (mostly 5-25 ms, 2% 1.5 s, 10% 503): every event is delivered,
// none is lost, and the duplicates are at most the rows the killed workers
// held in flight (each such row is reclaimed from its expired lease, and
// counted in webhook_outbox.reclaims).
// flaky is the consumer of the SIGKILL rounds: 10% of the requests get
// 503, 2% take 1.5 s, the others 5-24 ms; each answered 200 is passed to
// delivered.
func flaky(delivered func(d delivery)) func(d delivery) int {
	return func(d delivery) int {
		r := rand.IntN(100)
		switch {
		case r < 10:
			return http.StatusServiceUnavailable
		case r < 12:
			<-time.After(1500 * time.Millisecond)
		default:
			<-time.After(time.Duration(5+r%20) * time.Millisecond)
		}
		delivered(d)
		return http.StatusOK
	}
}

// killEnv is the workers' settings in the SIGKILL rounds: retries soon and
// without end, requests cut at 2 s.
var killEnv = map[string]string{"WEBHOOK_MAX_ATTEMPTS": "1000", "WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "50",
	"WEBHOOK_TIMEOUT_MS": "2000"}

// killRounds starts three workers with env, inserts events events of type
// "e" while SIGKILLing one of them every 150 ms, rounds times (a new one
// takes its place each time), and returns once every event is inserted.
func killRounds(t *testing.T, db *testdb.DB, env map[string]string, events, rounds int) {
	t.Helper()
	procs := []*process{startProcess(t, env), startProcess(t, env), startProcess(t, env)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range events {
			db.Insert(t, "e", fmt.Sprintf(`{"i":%d}`, i))
		}
	}()
	tick := time.NewTicker(150 * time.Millisecond)
	for range rounds {
		<-tick.C
		i := rand.IntN(len(procs))
		_ = procs[i].cmd.Process.Signal(syscall.SIGKILL)
		<-procs[i].done
		procs[i] = startProcess(t, env)
	}
	tick.Stop()
	<-done
}

func TestSIGKILLRoundsLoseNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var mu sync.Mutex
	ok := map[string]bool{}
	c := newConsumer(t, flaky(func(d delivery) {
		mu.Lock()
		ok[d.ID] = true
		mu.Unlock()
	}))
	env := baseEnv(db, c, killEnv)
	const events, rounds = 300, 8
	killRounds(t, db, env, events, rounds)
	waitfor.True(t, 60*time.Second, "everything delivered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
	mu.Lock()
	delivered := len(ok)
	mu.Unlock()
	if delivered != events {
		t.Fatalf("delivered %d distinct events of %d", delivered, events)
	}
	sent := 0
	for _, n := range c.byID() {
		sent += n
	}
	retries := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE attempt > 1")
	reclaimed := db.Count(t, "SELECT COALESCE(sum(reclaims), 0) FROM webhook_outbox")
	if dup := sent - events - retries; dup > reclaimed {
		t.Fatalf("%d duplicates, more than the %d rows held by killed workers", dup, reclaimed)
	}
	figures(t, "%d events, %d SIGKILLs, %d requests, %d retry rows (503s), lost 0, duplicates %d (rows in flight at the kills: %d)",
		events, rounds, sent, retries, sent-events-retries, reclaimed)
}
