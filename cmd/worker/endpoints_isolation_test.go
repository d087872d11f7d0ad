package main

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// An endpoint that hangs holds at most WEBHOOK_ENDPOINT_CONCURRENCY slots of
// a real worker process: every other endpoint's deliveries go through while
// it hangs, and its own rows wait in the table without spending an attempt.
func TestHangingEndpointHoldsOnlyItsCap(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	const events, cap = 40, 2
	hung, release := holdingConsumer(t)
	good := newConsumer(t, nil)
	env := newConsumer(t, nil)
	addEndpoint(t, db, "hung", hung)
	addEndpoint(t, db, "good", good)
	startProcess(t, baseEnv(db, env, map[string]string{
		"WEBHOOK_CONCURRENCY":          "8",
		"WEBHOOK_ENDPOINT_CONCURRENCY": strconv.Itoa(cap),
		"WEBHOOK_TIMEOUT_MS":           "60000", // no attempt ends while the test holds it
	}))
	for i := range events {
		enqueue(t, db, "e", `{"i":`+strconv.Itoa(i)+`}`, "")
	}
	// Every delivery to the two healthy endpoints is made while the hung
	// one still holds its first requests.
	waitfor.True(t, 30*time.Second, "healthy endpoints served", func() bool {
		return len(good.byID()) == events && len(env.byID()) == events
	})
	hung.mu.Lock()
	peak, got := hung.peak, len(hung.got)
	hung.mu.Unlock()
	// Bounded while it hangs; once it answers, its limit grows with each
	// 2xx, and its requests at once may pass the starting cap.
	if peak != cap || got != cap {
		t.Fatalf("hung endpoint: %d requests, %d at once; want exactly its cap %d", got, peak, cap)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id WHERE e.name = 'hung' AND NOT o.processed AND o.attempt = 1"); n != events {
		t.Fatalf("hung endpoint's pending first attempts: %d, want %d (waiting spends no attempt)", n, events)
	}
	release()
	waitfor.True(t, 60*time.Second, "hung endpoint served once released", func() bool { return len(hung.byID()) == events })
	deliveredOnceEach(t, hung, events)
	deliveredOnceEach(t, good, events)
	deliveredOnceEach(t, env, events)
	for _, d := range hung.deliveries() {
		if d.Attempt != 1 {
			t.Fatalf("a waiting row spent an attempt: %+v", d)
		}
	}
}

// An endpoint of webhook_endpoints alone grows past its starting limit to
// every slot, with as many requests at once, not just as many as its
// starting limit had connections: before, its sender allowed
// WEBHOOK_ENDPOINT_CONCURRENCY connections, and the slots above them waited
// inside the HTTP transport, their attempt's time running: a quick
// consumer looked slow.
func TestEndpointAloneUsesEverySlotWithItsOwnConnections(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	const slots, start, quick = 8, 2, 30
	hold := make(chan struct{})
	var seen atomic.Int64
	solo := newConsumer(t, func(delivery) int {
		if seen.Add(1) > quick { // the first answers grow its limit to every slot
			<-hold
		}
		return http.StatusOK
	})
	t.Cleanup(func() { close(hold) })
	addEndpoint(t, db, "solo", solo)
	startProcess(t, baseEnv(db, nil, map[string]string{
		"WEBHOOK_CONCURRENCY":          strconv.Itoa(slots),
		"WEBHOOK_ENDPOINT_CONCURRENCY": strconv.Itoa(start),
		"WEBHOOK_TIMEOUT_MS":           "60000", // no attempt ends while the test holds it
	}))
	for i := range quick + 2*slots {
		enqueue(t, db, "e", `{"i":`+strconv.Itoa(i)+`}`, "")
	}
	waitfor.True(t, 30*time.Second, "every slot's request held by the consumer at once", func() bool {
		solo.mu.Lock()
		defer solo.mu.Unlock()
		return solo.active == slots
	})
	solo.mu.Lock()
	defer solo.mu.Unlock()
	if solo.peak != slots {
		t.Fatalf("requests at once: peak %d, want every slot (%d)", solo.peak, slots)
	}
}
