package main

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("scrape %s: %v", sample, err)
			}
			return f
		}
	}
	return 0
}

func redisErrors(t *testing.T, base string) float64 {
	return metricValue(t, base, `fluxora_webhook_gate_redis_errors_total{op="check"}`) +
		metricValue(t, base, `fluxora_webhook_gate_redis_errors_total{op="record"}`)
}

// TestRedisPausedAndStoppedMidRun freezes (SIGSTOP) and then kills a private
// Redis under a running worker whose every attempt goes through both gates:
// deliveries never stop, each waits at most about two gate timeouts (one
// check, one record) more than usual, and gating resumes once Redis is back.
func TestRedisPausedAndStoppedMidRun(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	db := testdb.New(t)
	c := newConsumer(t, nil)
	const gateTimeout = 100 * time.Millisecond
	w := startInProcess(t, baseEnv(db, c, map[string]string{
		"REDIS_URL":                         rs.URL(),
		"WEBHOOK_CIRCUIT_BREAKER_THRESHOLD": "1000", // every attempt checks and records
		"WEBHOOK_GATE_TIMEOUT_MS":           strconv.Itoa(int(gateTimeout / time.Millisecond)),
	}))
	base := startedWorker(t, w.logs)
	// go-redis on its own would hold a call to a frozen server for its 3 s
	// read timeout, three times over; the gates must bound it instead.
	const bound = time.Second
	phase := func(name string) []time.Duration {
		lat := latencies(t, c, paced(t, db, 20, 20*time.Millisecond), 20*time.Second)
		figures(t, "%-9s p50 %v  max %v  redis errors so far %v", name,
			lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), redisErrors(t, base))
		return lat
	}
	phase("up")
	if n := redisErrors(t, base); n != 0 {
		t.Fatalf("%v Redis errors while Redis was up", n)
	}

	rs.Pause()
	paused := phase("paused")
	rs.Resume()
	if max := paused[len(paused)-1]; max > bound {
		t.Fatalf("Redis paused: an event took %v (bound %v)", max, bound)
	}
	if redisErrors(t, base) == 0 {
		t.Fatal("Redis paused: no gate call timed out, so the gates were not in the path")
	}
	phase("resumed")

	rs.Kill()
	stopped := phase("stopped")
	if max := stopped[len(stopped)-1]; max > bound {
		t.Fatalf("Redis stopped: an event took %v (bound %v)", max, bound)
	}
	if err := rs.StartAgain(); err != nil {
		t.Fatal(err)
	}
	// Gating resumes: after the first successful call, a whole phase adds
	// no Redis error.
	waitfor.True(t, 20*time.Second, "gates use Redis again", func() bool {
		before := redisErrors(t, base)
		phase("restarted")
		return redisErrors(t, base) == before
	})
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 0 {
		t.Fatalf("%d events dead-lettered", n)
	}
}
