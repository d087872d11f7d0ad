package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// Under a continuous stream the worker holds the notifier lock shared, so
// producers stop notifying; when the stream stops it lets go, and a lone
// event is delivered through its NOTIFY again, long before the poll.
func TestBusyWorkerHushesProducers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	w := startInProcess(t, baseEnv(db, c, nil))
	base := startedWorker(t, w.logs)
	hushed := func() bool { return metricValue(t, base, "fluxora_webhook_notify_hushed") == 1 }

	stop := make(chan struct{})
	var wg sync.WaitGroup
	inserted := 0
	var mu sync.Mutex
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := db.Pool.Exec(context.Background(),
					"INSERT INTO webhook_outbox (event_type, payload) VALUES ('stream', '{}')"); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inserted++
				mu.Unlock()
			}
		})
	}
	waitfor.True(t, 30*time.Second, "worker hushes producers under a continuous stream", hushed)
	close(stop)
	wg.Wait()
	waitProcessed(t, db, inserted, 30*time.Second)
	waitfor.True(t, 10*time.Second, "hush released once the stream stops", func() bool { return !hushed() })

	// Released: a lone event reaches the consumer through its NOTIFY.
	before := metricValue(t, base, "fluxora_webhook_notifications_received_total")
	db.Insert(t, "lone", `{}`)
	waitProcessed(t, db, inserted+1, 5*time.Second) // the poll is 60 s
	if after := metricValue(t, base, "fluxora_webhook_notifications_received_total"); after <= before {
		t.Fatalf("the lone event was not notified (notifications %v -> %v)", before, after)
	}
	if n := len(c.byID()); n != inserted+1 {
		t.Fatalf("delivered %d distinct events, want %d", n, inserted+1)
	}
}
