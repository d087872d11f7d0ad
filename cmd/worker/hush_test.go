package main

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/sender"
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
	// The gauge drops when the worker lets go; if it let go by closing its
	// session, the server frees the lock a moment later. Producers notify
	// only once it is free.
	waitfor.True(t, 10*time.Second, "notifier lock free on the server", func() bool {
		return db.Count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 1 AND objsubid = 2
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`) == 0
	})

	// Released: a lone event reaches the consumer through its NOTIFY.
	before := metricValue(t, base, "fluxora_webhook_notifications_received_total")
	db.Insert(t, "lone", `{}`)
	waitProcessed(t, db, inserted+1, 5*time.Second) // the poll is 60 s
	// The once-a-second sweep may claim the event first on a loaded
	// machine; what matters is that its NOTIFY was sent and received.
	waitfor.True(t, 5*time.Second, "the lone event notified", func() bool {
		return metricValue(t, base, "fluxora_webhook_notifications_received_total") > before
	})
	if n := len(c.byID()); n != inserted+1 {
		t.Fatalf("delivered %d distinct events, want %d", n, inserted+1)
	}
}

// recordingHush records what the dispatcher asks of its hush.
type recordingHush struct {
	mu    sync.Mutex
	calls []string
}

func (h *recordingHush) Set(busy bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if busy {
		h.calls = append(h.calls, "busy")
	} else {
		h.calls = append(h.calls, "idle")
	}
}

func (h *recordingHush) Help() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "help")
}

func (h *recordingHush) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// A worker whose every delivery slot is taken while rows keep coming asks
// the hush for help (so that other workers are woken), and goes idle once
// a claim comes back empty.
func TestSaturatedWorkerAsksForHelp(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c, release := holdingConsumer(t)
	store, err := outbox.New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := sender.New(sender.Config{URL: c.srv.URL, Secret: []byte(testSecret), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	per, err := sender.NewPerEndpoint(sender.PerEndpointConfig{Env: snd, Base: sender.Config{Timeout: 10 * time.Second, MaxConns: 2}})
	if err != nil {
		t.Fatal(err)
	}
	h := &recordingHush{}
	wake := make(chan struct{}, 1)
	d, err := dispatcher.New(dispatcher.Config{
		Store: store, Sender: per, Hush: h, Wake: wake, Registerer: prometheus.NewRegistry(),
		EnvEndpoint: true,
		BatchSize:   1, Concurrency: 2, EndpointConcurrency: 2, MaxAttempts: 3,
		PollInterval: time.Minute, BackoffBase: time.Second, BackoffMax: time.Second,
		Rand: func() float64 { return 0.5 },
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Insert(t, "e", `{}`, `{}`, `{}`, `{}`, `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, context.Background()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	waitArrivals(t, c, 2) // both slots taken, three rows still due
	waitfor.True(t, 10*time.Second, "busy, then help", func() bool {
		s := h.seen()
		return len(s) >= 2 && s[0] == "busy" && s[1] == "help"
	})
	release()
	waitProcessed(t, db, 5, 20*time.Second)
	waitfor.True(t, 10*time.Second, "idle after the last empty claim", func() bool {
		s := h.seen()
		return s[len(s)-1] == "idle"
	})
}
