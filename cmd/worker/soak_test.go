package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/testredis"
)

// soakDuration is how long TestSoak runs: FLUXORA_SOAK (a Go duration, at
// least 30 s), or 30 s, which keeps scripts/test.sh within two minutes. A
// slot is a tenth of the run, so the run's length mostly sets the steady
// traffic between faults, not their number: 30 s injects six faults (each
// of the five kinds, then the first again) and takes six samples, one
// minute (the former default) seven, five minutes nine.
func soakDuration(t *testing.T) time.Duration {
	v := os.Getenv("FLUXORA_SOAK")
	if v == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 30*time.Second {
		t.Fatalf("FLUXORA_SOAK: want a duration of at least 30s, got %q", v)
	}
	return d
}

// Consumer behaviours during the soak.
const (
	consumerOK = iota
	consumerFailing
	consumerSlow
)

// soakFault is one fault: start it, and end it (nil when it ends itself).
type soakFault struct {
	name       string
	start, end func()
}

// TestSoak runs one worker process for FLUXORA_SOAK at a steady 50 events/s
// through the gates on a private Redis, with a fault in every slot: the
// consumer failing with 503, the consumer slow, every worker connection
// terminated, Redis paused, Redis killed and restarted. After each fault it
// waits for the backlog to drain (lag recovers) and samples the worker's
// goroutines and heap from its /metrics; at the end nothing is lost, the
// samples are flat, and SIGTERM exits 0.
//
// The soak is the package's longest test and its length is fixed, so it
// starts before t.Parallel, in the package's sequential phase: its worker,
// producer and faults run in the background from there, while the other
// tests run, and the test takes a -parallel slot only to wait for the
// soak's end and check what it saw. Were it to start after t.Parallel, it
// would wait for a slot behind an arbitrary share of the other tests
// before its fixed length even began.
func TestSoak(t *testing.T) {
	total := soakDuration(t)
	rs := testredis.Start(t)
	db := testdb.New(t)
	var mode atomic.Int32
	c := newConsumer(t, func(delivery) int {
		switch mode.Load() {
		case consumerFailing:
			return http.StatusServiceUnavailable
		case consumerSlow:
			time.Sleep(300 * time.Millisecond)
		}
		return http.StatusOK
	})
	p := startProcess(t, baseEnv(db, c, map[string]string{
		"REDIS_URL":                         rs.URL(),
		"WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "1000000", // in the path, never open
		"WEBHOOK_RETRY_RPS":                 "100000",
		"WEBHOOK_MAX_ATTEMPTS":              "1000",
		"LOG_LEVEL":                         "info",
	}))
	base := startedWorker(t, p.logs)

	// The producer: one event every 20 ms until stop.
	var (
		mu   sync.Mutex
		sent = map[string]time.Time{}
		stop = make(chan struct{})
		prod sync.WaitGroup
	)
	prod.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			start := time.Now()
			var id string
			err := db.Pool.QueryRow(context.Background(),
				"INSERT INTO webhook_outbox (event_type, payload) VALUES ('soak', jsonb_build_object('i', $1::int)) RETURNING delivery_id::text",
				i).Scan(&id)
			if err != nil {
				t.Errorf("producer: %v", err)
				return
			}
			mu.Lock()
			sent[id] = start
			mu.Unlock()
		}
	})

	hold := func() { time.Sleep(2 * time.Second) } // a fault lasts 2 s of producer traffic
	faults := []soakFault{
		{"consumer 503", func() { mode.Store(consumerFailing); hold() }, func() { mode.Store(consumerOK) }},
		{"consumer slow", func() { mode.Store(consumerSlow); hold() }, func() { mode.Store(consumerOK) }},
		{"connections killed", func() {
			_, err := db.Pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name LIKE 'fluxora-webhook-%'`)
			if err != nil {
				t.Errorf("terminate: %v", err)
			}
		}, nil},
		{"redis paused", func() { rs.Pause(); hold() }, rs.Resume},
		{"redis killed", func() { rs.Kill(); hold() }, func() {
			if err := rs.StartAgain(); err != nil {
				t.Error(err)
			}
		}},
	}

	// The faults, in the background (see above): a failure ends them with
	// run.err, reported once the test has its slot.
	type sample struct {
		at         time.Duration
		goroutines float64
		heap       float64
	}
	var run struct {
		samples  []sample
		lines    []string // figures, written by the test's goroutine
		injected int
		err      error
	}
	soaked := make(chan struct{})
	go func() {
		defer close(soaked)
		defer prod.Wait()
		defer close(stop)
		began := time.Now()
		slot := total / time.Duration(2*len(faults))
		for i := 0; time.Since(began) < total-slot; i++ {
			f := faults[i%len(faults)]
			f.start()
			if f.end != nil {
				f.end()
			}
			run.injected++
			ended := time.Now()
			// Lag recovers: the backlog the fault left drains, and an event
			// inserted after the fault has reached the consumer.
			err := soakWait(30*time.Second, func() (bool, error) {
				var n int
				err := db.Pool.QueryRow(context.Background(),
					"SELECT count(*) FROM webhook_outbox WHERE NOT processed AND created_at < now() - interval '200 milliseconds'").Scan(&n)
				if err != nil || n != 0 {
					return false, err
				}
				mu.Lock()
				defer mu.Unlock()
				for _, d := range c.deliveries() {
					if at, ok := sent[d.ID]; ok && at.After(ended) && d.Status == http.StatusOK {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				run.err = fmt.Errorf("lag recovered after %s: %w", f.name, err)
				return
			}
			recovered := time.Since(ended)
			if err := soakWait(10*time.Second, func() (bool, error) { return ready(base), nil }); err != nil {
				run.err = fmt.Errorf("ready after %s: %w", f.name, err)
				return
			}
			s := sample{at: time.Since(began)}
			if s.goroutines, err = scrapeMetric(base, "go_goroutines"); err == nil {
				s.heap, err = scrapeMetric(base, "go_memstats_heap_inuse_bytes")
			}
			if err != nil {
				run.err = err
				return
			}
			run.samples = append(run.samples, s)
			run.lines = append(run.lines, fmt.Sprintf("%6s %-18s recovered in %-8v goroutines %3.0f heap %5.1f MiB", s.at.Round(time.Second), f.name,
				recovered.Round(time.Millisecond), s.goroutines, s.heap/(1<<20)))
			if rest := slot - time.Since(ended); rest > 0 {
				time.Sleep(rest) // steady traffic between faults
			}
		}
	}()
	t.Parallel()
	<-soaked
	for _, l := range run.lines {
		figures(t, "%s", l)
	}
	if run.err != nil {
		t.Fatal(run.err)
	}
	samples, injected := run.samples, run.injected

	mu.Lock()
	defer mu.Unlock()
	lat := latencies(t, c, sent, 60*time.Second)
	// Lost: an event no request was answered 200 for. Duplicate: a second
	// 200 for the same event (a batch whose commit was cut, or a request
	// the worker timed out that the consumer still answered).
	ok := map[string]int{}
	retries := 0
	for _, d := range c.deliveries() {
		if d.Status == http.StatusOK {
			ok[d.ID]++
		}
		if d.Attempt > 1 {
			retries++
		}
	}
	lost, dups := 0, 0
	for id := range sent {
		if ok[id] == 0 {
			lost++
		}
		dups += max(0, ok[id]-1)
	}
	figures(t, "soak %v: %d events, %d faults, lost %d, duplicates %d, retry requests %d, latency p50 %v p99 %v max %v",
		total, len(sent), injected, lost, dups, retries,
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	if lost != 0 {
		t.Fatalf("%d events never answered 200", lost)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d events dead-lettered", n)
	}

	// Flat: a leak raises the floor, so the later half's lowest sample must
	// stay within the earlier half's peak plus a margin. Single samples
	// spike with the idle keep-alive connections a burst of retries leaves
	// open for 90 s (two goroutines each, up to one per slot), and those
	// spikes land in either half, the first fault's the largest.
	if len(samples) < 4 {
		t.Fatalf("only %d samples; run longer", len(samples))
	}
	half := len(samples) / 2
	pick := func(ss []sample, f func(sample) float64, agg func([]float64) float64) float64 {
		out := make([]float64, len(ss))
		for i, s := range ss {
			out[i] = f(s)
		}
		return agg(out)
	}
	goroutines := func(s sample) float64 { return s.goroutines }
	heap := func(s sample) float64 { return s.heap }
	g0, g1 := pick(samples[:half], goroutines, slices.Max[[]float64]), pick(samples[half:], goroutines, slices.Min[[]float64])
	h0, h1 := pick(samples[:half], heap, slices.Max[[]float64]), pick(samples[half:], heap, slices.Min[[]float64])
	if g1 > g0+20 {
		t.Errorf("goroutines grew: peak %v in the first half, at least %v all through the second", g0, g1)
	}
	if h1 > 1.5*h0+4<<20 {
		t.Errorf("heap grew: peak %.1f MiB in the first half, at least %.1f MiB all through the second", h0/(1<<20), h1/(1<<20))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 40*time.Second); code != 0 {
		t.Fatalf("SIGTERM after the soak: exit %d", code)
	}
}

// soakWait is waitfor.True for the soak's background goroutine, which must
// not end the test itself: it polls cond every 5 ms until it holds, it
// fails, or timeout passes.
func soakWait(timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v", timeout)
		}
		<-tick.C
	}
}
