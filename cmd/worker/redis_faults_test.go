package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/testredis"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// paced inserts n events, one every gap, each in its own transaction, and
// returns each delivery id's insert start.
func paced(t *testing.T, db *testdb.DB, n int, gap time.Duration) map[string]time.Time {
	t.Helper()
	out := make(map[string]time.Time, n)
	tick := time.NewTicker(gap)
	defer tick.Stop()
	for i := range n {
		start := time.Now()
		var id string
		err := db.Pool.QueryRow(context.Background(),
			"INSERT INTO webhook_outbox (event_type, payload) VALUES ('paced', jsonb_build_object('i', $1::int)) RETURNING delivery_id::text",
			i).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = start
		<-tick.C
	}
	return out
}

// latencies waits until the consumer has answered 200 for every event in
// sent and returns the insert-to-receipt times of those first successful
// requests, sorted.
func latencies(t *testing.T, c *consumer, sent map[string]time.Time, timeout time.Duration) []time.Duration {
	t.Helper()
	first := map[string]time.Time{}
	waitfor.True(t, timeout, "every event answered 200", func() bool {
		for _, d := range c.deliveries() {
			if _, ok := first[d.ID]; !ok && d.Status == http.StatusOK {
				first[d.ID] = d.At
			}
		}
		for id := range sent {
			if _, ok := first[id]; !ok {
				return false
			}
		}
		return true
	})
	out := make([]time.Duration, 0, len(sent))
	for id, start := range sent {
		out = append(out, first[id].Sub(start))
	}
	slices.Sort(out)
	return out
}

// metricValue scrapes one sample (name plus its exact label text, e.g.
// `{op="check"}`) from a /metrics page; absent counts as 0.
func metricValue(t *testing.T, base, sample string) float64 {
	t.Helper()
	v, err := scrapeMetric(base, sample)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// scrapeMetric is metricValue returning its error, for a goroutine other
// than the test's.
func scrapeMetric(base, sample string) (float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("scrape %s: %w", sample, err)
			}
			return f, nil
		}
	}
	return 0, nil
}

// gateErrors is the worker's count of gate calls that failed (and so
// failed open).
func gateErrors(t *testing.T, base string) float64 {
	return metricValue(t, base, `fluxora_webhook_gate_redis_errors_total{op="check"}`) +
		metricValue(t, base, `fluxora_webhook_gate_redis_errors_total{op="record"}`)
}

// gateScripts is how many scripts the Redis at addr has run to completion
// since it started (EVAL and EVALSHA calls less failed ones, so a NOSCRIPT
// EVALSHA and the EVAL that follows count once). Only the worker under test
// uses that Redis, and its only scripts are the gates' check and record.
func gateScripts(t *testing.T, addr string) int {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatalf("redis commandstats: %v", err)
	}
	n := 0
	for line := range strings.Lines(info) {
		name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name != "cmdstat_eval" && name != "cmdstat_evalsha" {
			continue
		}
		for field := range strings.SplitSeq(stats, ",") {
			k, v, _ := strings.Cut(field, "=")
			x, _ := strconv.Atoi(v)
			switch k {
			case "calls":
				n += x
			case "failed_calls":
				n -= x
			}
		}
	}
	return n
}

// redisPhase is what one phase of paced events showed.
type redisPhase struct {
	lat     []time.Duration // insert to first 200, sorted
	errors  float64         // gate calls that failed during the phase
	scripts int             // gate scripts Redis ran during the phase; -1 when Redis was not up to ask
}

func (p redisPhase) p50() time.Duration { return p.lat[len(p.lat)/2] }
func (p redisPhase) max() time.Duration { return p.lat[len(p.lat)-1] }

// TestRedisPausedAndStoppedMidRun freezes (SIGSTOP) and then kills a private
// Redis under a running worker whose every attempt goes through both gates
// (a check before, a record after): deliveries never stop and nothing is
// lost, a frozen or dead Redis costs an event about one gate timeout, and
// gating resumes once Redis is back.
//
// What depends on the machine's load is bounded with margins that hold
// under the whole suite (-race -parallel 8 on 2 cores), and the assertions
// are about the faults, not about absolute latency:
//   - The gate timeout is 500 ms, not the 100 ms default: a loaded machine
//     can hold a loopback Redis call past 100 ms, and each such call counts
//     as a gate error while Redis is up.
//   - A paused or dead Redis must cost each event at most one gate timeout
//     plus loadMargin. That bound (2.5 s) stays below go-redis's own 3 s
//     read timeout, so a call not bounded by the gate timeout fails the
//     test (with boundRedisCalls a no-op, a paused Redis would hold every
//     event for go-redis's timeout and its retries).
//   - "The gates work with Redis" is measured per phase, not assumed: no
//     gate call failed and Redis ran a check and a record for every event.
//     A Redis that is up must show such a phase within a deadline (a load
//     spike past the gate timeout only costs another phase; so does the
//     first phase after the restart, while go-redis, after a run of
//     refused dials, redials about once a second), a paused or dead one
//     must fail every check.
//
// After each phase the test waits until every row is processed, so each
// event's record (made after its request) has ended and its errors count in
// its own phase.
func TestRedisPausedAndStoppedMidRun(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	db := testdb.New(t)
	c := newConsumer(t, nil)
	const (
		gateTimeout = 500 * time.Millisecond
		loadMargin  = 2 * time.Second // what a busy machine adds to a delivery, with room
		bound       = gateTimeout + loadMargin
		events      = 20 // per phase
	)
	w := startInProcess(t, baseEnv(db, c, map[string]string{
		"REDIS_URL":                         rs.URL(),
		"WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "1000", // every attempt checks and records
		"WEBHOOK_GATE_TIMEOUT_MS":           strconv.Itoa(int(gateTimeout / time.Millisecond)),
	}))
	base := startedWorker(t, w.logs)
	inserted := 0
	phase := func(name string, redisUp bool) redisPhase {
		errors, scripts := gateErrors(t, base), 0
		if redisUp {
			scripts = gateScripts(t, rs.Addr())
		}
		lat := latencies(t, c, paced(t, db, events, 20*time.Millisecond), 30*time.Second)
		inserted += events
		waitProcessed(t, db, inserted, 30*time.Second)
		p := redisPhase{lat: lat, errors: gateErrors(t, base) - errors, scripts: -1}
		ran := "-"
		if redisUp {
			p.scripts = gateScripts(t, rs.Addr()) - scripts
			ran = strconv.Itoa(p.scripts)
		}
		figures(t, "%-9s %d events  p50 %v  max %v  gate errors %v  scripts Redis ran %s", name, events,
			p.p50().Round(time.Millisecond), p.max().Round(time.Millisecond), p.errors, ran)
		return p
	}
	// working waits for a phase in which the gates decided every event with
	// Redis: none of their calls failed, and Redis ran them all. It returns
	// when that phase began.
	working := func(name string) time.Time {
		t.Helper()
		var began time.Time
		waitfor.True(t, 2*time.Minute, name+": a phase whose every gate call Redis answered", func() bool {
			began = time.Now()
			p := phase(name, true)
			return p.errors == 0 && p.scripts >= 2*events
		})
		return began
	}
	// failingOpen checks a phase with Redis paused or dead: every check
	// failed (the gates were in the path) and no event waited much longer
	// than one gate timeout for it.
	failingOpen := func(name string) {
		t.Helper()
		p := phase(name, false)
		if p.errors < events {
			t.Fatalf("Redis %s: %v gate errors for %d events: the gates were not in the path", name, p.errors, events)
		}
		if p.max() > bound {
			t.Fatalf("Redis %s: an event took %v (bound %v: gate timeout %v + %v for load)",
				name, p.max(), bound, gateTimeout, loadMargin)
		}
	}

	working("up")
	rs.Pause()
	failingOpen("paused")
	rs.Resume()
	working("resumed")
	rs.Kill()
	failingOpen("stopped")
	if err := rs.StartAgain(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	resumed := working("restarted").Sub(restarted)

	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d events dead-lettered", n)
	}
	figures(t, "gate timeout %v, bound per event with Redis paused or dead %v; the first phase decided wholly by Redis began %v after its restart",
		gateTimeout, bound, resumed.Round(time.Millisecond))
}
