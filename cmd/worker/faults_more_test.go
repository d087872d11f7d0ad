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

// The commit after a successful POST fails (the connection is cut between
// send and commit): the event is delivered again, never lost.
func TestCommitFailureRedelivers(t *testing.T) {
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
		if n < 2 {
			t.Fatalf("delivery %s sent %d times; the lost commit must cause a redelivery", id, n)
		}
		figures(t, "commit cut after a 200: the event was sent %d times, lost 0", n)
	}
}

// A server idle_in_transaction_session_timeout below the time a batch
// waits on HTTP: the worker sets its own, so nothing is lost or re-sent.
func TestLowIdleInTransactionTimeoutIsOverridden(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(context.Background(), "ALTER DATABASE "+db.Name+" SET idle_in_transaction_session_timeout = '100ms'"); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, func(delivery) int {
		<-time.After(400 * time.Millisecond) // a slow consumer, four times the server's limit
		return http.StatusOK
	})
	startInProcess(t, baseEnv(db, c, nil))
	insertTx(t, db, 5)
	waitProcessed(t, db, 5, 20*time.Second)
	for id, n := range c.byID() {
		if n != 1 {
			t.Fatalf("delivery %s sent %d times", id, n)
		}
	}
	if len(c.byID()) != 5 {
		t.Fatalf("delivered %d of 5", len(c.byID()))
	}
}

// Rounds of SIGKILL at random moments with three workers and a consumer that
// is sometimes slow and sometimes failing: every event is delivered, none is
// lost; duplicates are counted (each is a delivery whose commit died with
// its worker).
func TestSIGKILLRoundsLoseNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var mu sync.Mutex
	ok := map[string]bool{}
	c := newConsumer(t, func(d delivery) int {
		r := rand.IntN(100)
		if r < 10 {
			return http.StatusServiceUnavailable
		}
		if r < 30 {
			<-time.After(time.Duration(r) * time.Millisecond)
		}
		mu.Lock()
		ok[d.ID] = true
		mu.Unlock()
		return http.StatusOK
	})
	env := baseEnv(db, c, map[string]string{"WEBHOOK_MAX_ATTEMPTS": "1000", "WEBHOOK_BACKOFF_BASE_MS": "10", "WEBHOOK_BACKOFF_MAX_MS": "50"})
	procs := []*process{startProcess(t, env), startProcess(t, env), startProcess(t, env)}
	const events, rounds = 300, 8
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
	figures(t, "%d events, %d SIGKILLs, %d requests, %d retry rows (503s), lost 0, duplicates of delivered events %d",
		events, rounds, sent, retries, sent-events-retries)
}
