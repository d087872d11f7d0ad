package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// The bounded soak's shape: its endpoints, the failing and the hanging
// ones among them, the stream, and the retention.
const (
	boundedEndpoints = 100
	boundedFailing   = 5              // endpoints 0..4 answer 503
	boundedHanging   = boundedFailing // the next one never answers
	boundedRate      = 100
	boundedRetention = 10 * time.Minute
	// boundedCycle is when the first retention cycle is over: the first
	// partitions (ShortWidth, 10 minutes) are past the retention and
	// dropped, one round (a minute) later.
	boundedCycle = 2*boundedRetention + 2*time.Minute
)

// boundedSample is what the soak reads of the worker and the database at a
// moment.
type boundedSample struct {
	At          time.Duration
	RSS         float64 // the worker's resident set, bytes
	Goroutines  float64
	Connections int
	Tables      map[string]boundedTable // by family (boundedFamilies)
}

// boundedTable is a family of tables: bytes of the tables and of their
// indexes, and their live and dead tuples as pg_stat_user_tables counts them.
type boundedTable struct {
	Table, Index int64
	Live, Dead   int64
}

// total is the sum of the families but the backlog samples, which the
// console keeps for 8 days whatever the retention.
func (s boundedSample) total() (bytes, dead int64) {
	for f, t := range s.Tables {
		if f != "backlog_samples" {
			bytes += t.Table + t.Index
			dead += t.Dead
		}
	}
	return bytes, dead
}

// boundedFamiliesSQL sizes the worker's tables by family: a partitioned
// table is the sum of its partitions.
const boundedFamiliesSQL = `SELECT CASE
    WHEN c.relname = 'webhook_outbox_pending' THEN 'pending'
    WHEN c.relname LIKE 'webhook_outbox_history%' THEN 'history'
    WHEN c.relname LIKE 'webhook_attempts%' THEN 'attempts'
    ELSE replace(c.relname, 'webhook_', '') END AS family,
  sum(pg_table_size(c.oid))::bigint, sum(pg_indexes_size(c.oid))::bigint,
  sum(coalesce(s.n_live_tup, 0))::bigint, sum(coalesce(s.n_dead_tup, 0))::bigint
FROM pg_class c
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.relkind = 'r' AND c.relname LIKE 'webhook_%' AND c.relnamespace = 'public'::regnamespace
  AND c.relname <> 'webhook_schema_migrations'
GROUP BY 1`

// boundedFamilies is the order the figures print the families in.
var boundedFamilies = []string{"pending", "history", "attempts", "dead_letter", "ordering_lanes", "ordering_floors", "endpoints", "backlog_samples"}

// TestSoakBounded is the soak of a worker kept for months: a steady stream
// of boundedRate deliveries a second, one in ten with an ordering key used
// three times (an order's id), to boundedEndpoints endpoints, of which
// boundedFailing answer 503 and one never answers, with WEBHOOK_RETENTION
// at 10 minutes, for FLUXORA_SOAK (it does not run without it: its subject
// needs half an hour at least; FLUXORA_SOAK=1h is the figure of
// bench/RESULTS.md; run it alone, -run 'TestSoakBounded$'). An operator's
// cron purges the dead letters older than the retention every minute, and
// vacuums the database when the server's autovacuum is off.
// It samples the worker's resident set, goroutines and connections, and
// every table's and index's size and live and dead tuples, a thirtieth of
// the run apart, and prints them as a table. Every delivery to a healthy
// endpoint is answered 200; when the run outlasts the first retention
// cycle twice over, the last third's peaks stay within the middle third's
// (a sawtooth within one partition's width, not a slope), and the ordering
// lanes of the keys used once go. SIGTERM exits 0.
func TestSoakBounded(t *testing.T) {
	v := os.Getenv("FLUXORA_SOAK")
	if v == "" {
		t.Skip("FLUXORA_SOAK unset: the bounded soak runs for a duration given (FLUXORA_SOAK=1h)")
	}
	total, err := time.ParseDuration(v)
	if err != nil || total < time.Minute {
		t.Fatalf("FLUXORA_SOAK: want a duration of at least 1m, got %q", v)
	}
	ctx := context.Background()
	db := testdb.New(t)

	var delivered sync.Map // delivery id -> struct{}, answered 200
	hung := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/e/"))
		switch {
		case n < boundedFailing:
			w.WriteHeader(http.StatusServiceUnavailable)
		case n == boundedHanging:
			select {
			case <-r.Context().Done():
			case <-hung:
			}
		default:
			delivered.Store(r.Header.Get("x-fluxora-delivery-id"), struct{}{})
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hung) }) // before the server's Close, which waits for every request
	ids := make([]string, boundedEndpoints)
	for i := range ids {
		if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ($1, $2, 'whsec_soak_secret')
			RETURNING id::text`, fmt.Sprintf("e%03d", i), fmt.Sprintf("%s/e/%d", srv.URL, i)).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	p := startProcess(t, endpointsOnly(db, map[string]string{
		"WEBHOOK_RETENTION":              boundedRetention.String(),
		"WEBHOOK_MAX_ATTEMPTS":           "5",
		"WEBHOOK_BACKOFF_BASE_MS":        "1000",
		"WEBHOOK_BACKOFF_MAX_MS":         "5000",
		"WEBHOOK_TIMEOUT_MS":             "2000",
		"WEBHOOK_ENDPOINT_DISABLE_AFTER": "0", // the failing endpoints fail all through
		"WEBHOOK_POLL_INTERVAL_MS":       "1000",
		"LOG_LEVEL":                      "info",
	}))
	base := startedWorker(t, p.logs)

	// The stream: a tenth of a second's rows at a time.
	var (
		mu      sync.Mutex
		healthy = map[string]time.Time{} // delivery id -> sent, to an endpoint that answers
		sent    atomic.Int64
	)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			b := &pgx.Batch{}
			var targets []int
			for range boundedRate / 10 {
				n := rng.IntN(boundedEndpoints)
				var key any
				if i%10 == 0 {
					key = fmt.Sprintf("order-%d", i/30) // three events a key, then never again
				}
				b.Queue(`INSERT INTO webhook_outbox (event_type, payload, endpoint_id, ordering_key)
					VALUES ('soak', jsonb_build_object('i', $1::int), $2, $3) RETURNING delivery_id::text`, i, ids[n], key)
				targets = append(targets, n)
				i++
			}
			br := db.Pool.SendBatch(ctx, b)
			now := time.Now()
			for _, n := range targets {
				var id string
				if err := br.QueryRow().Scan(&id); err != nil {
					t.Errorf("producer: %v", err)
					br.Close()
					return
				}
				sent.Add(1)
				if n >= boundedFailing && n != boundedHanging {
					mu.Lock()
					healthy[id] = now
					mu.Unlock()
				}
			}
			if err := br.Close(); err != nil {
				t.Errorf("producer: %v", err)
				return
			}
		}
	})
	// The operator's cron: dead letters older than the retention go. A
	// server whose autovacuum is off (the tests' may be) gets the vacuum
	// it would make, every minute, so that dead tuples say whether
	// anything holds them back rather than whether a vacuum ran.
	var autovacuum string
	if err := db.Pool.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum); err != nil {
		t.Fatal(err)
	}
	bg.Go(func() {
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := db.Pool.Exec(ctx, `DELETE FROM webhook_dead_letter WHERE died_at < now() - $1::interval`, boundedRetention.String()); err != nil {
				t.Errorf("purge: %v", err)
				return
			}
			if autovacuum == "off" {
				if _, err := db.Pool.Exec(ctx, "VACUUM (ANALYZE, SKIP_LOCKED)"); err != nil {
					t.Errorf("vacuum: %v", err)
					return
				}
			}
		}
	})

	every := total / 30
	var samples []boundedSample
	began := time.Now()
	for time.Since(began) < total {
		time.Sleep(min(every, total-time.Since(began)))
		s, err := boundedRead(ctx, db, base, p.cmd.Process.Pid)
		if err != nil {
			t.Error(err)
			break
		}
		s.At = time.Since(began)
		samples = append(samples, s)
	}
	close(stop)
	bg.Wait()

	figures(t, "soak %v: %d deliveries sent to %d endpoints (%d failing, 1 hanging), retention %v, autovacuum %s (off: a VACUUM a minute)",
		total, sent.Load(), boundedEndpoints, boundedFailing, boundedRetention, autovacuum)
	boundedPrint(t, samples)

	// Every delivery to a healthy endpoint is answered, but for those sent
	// in the last moments, given a minute more.
	mu.Lock()
	defer mu.Unlock()
	var missing []string
	for id := range healthy {
		if _, ok := delivered.Load(id); !ok {
			missing = append(missing, id)
		}
	}
	waitfor.True(t, time.Minute, "every delivery to a healthy endpoint answered 200", func() bool {
		missing = slices.DeleteFunc(missing, func(id string) bool { _, ok := delivered.Load(id); return ok })
		return len(missing) == 0
	})

	if total >= boundedCycle*2 {
		boundedFlat(t, samples)
		// The lanes of keys used a moment went with the retention: those
		// left are about the last retention period's (and a round's).
		lanes := db.Count(t, `SELECT count(*) FROM webhook_ordering_lanes`)
		used := int64(total/time.Second) * boundedRate / 10 // a lane a keyed row, nearly: a key's rows go to random endpoints
		if most := used * int64(boundedRetention+5*time.Minute) / int64(total); int64(lanes) > most {
			t.Errorf("%d ordering lanes left of about %d used, want at most %d (those of the last retention period)", lanes, used, most)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 40*time.Second); code != 0 {
		t.Fatalf("SIGTERM after the soak: exit %d", code)
	}
}

// boundedRead takes one sample.
func boundedRead(ctx context.Context, db *testdb.DB, base string, pid int) (boundedSample, error) {
	s := boundedSample{Tables: map[string]boundedTable{}}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			s.RSS = kb * 1024
		}
	}
	if s.Goroutines, err = scrapeMetric(base, "go_goroutines"); err != nil {
		return s, err
	}
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'fluxora-webhook-%'`).Scan(&s.Connections); err != nil {
		return s, err
	}
	rows, err := db.Pool.Query(ctx, boundedFamiliesSQL)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var f string
		var tb boundedTable
		if err := rows.Scan(&f, &tb.Table, &tb.Index, &tb.Live, &tb.Dead); err != nil {
			return s, err
		}
		s.Tables[f] = tb
	}
	return s, rows.Err()
}

// boundedPrint prints the samples as a Markdown table (sizes in MiB, table
// + indexes; tuples live/dead).
func boundedPrint(t *testing.T, samples []boundedSample) {
	mib := func(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }
	head := "| at | RSS MiB | goroutines | conns | total MiB | dead tuples |"
	sep := "|---|---|---|---|---|---|"
	for _, f := range boundedFamilies {
		head += " " + f + " MiB (live/dead) |"
		sep += "---|"
	}
	figures(t, "%s", head)
	figures(t, "%s", sep)
	for _, s := range samples {
		bytes, dead := s.total()
		line := fmt.Sprintf("| %s | %.1f | %.0f | %d | %s | %d |", s.At.Round(time.Second), s.RSS/(1<<20), s.Goroutines, s.Connections,
			mib(bytes), dead)
		for _, f := range boundedFamilies {
			tb := s.Tables[f]
			line += fmt.Sprintf(" %s (%d/%d) |", mib(tb.Table+tb.Index), tb.Live, tb.Dead)
		}
		figures(t, "%s", line)
	}
}

// boundedFlat fails the test when a figure's peak in the last third of the
// run is above its peak in the middle third (after the first retention
// cycle) by more than a margin: history comes and goes in partitions of
// 10 minutes, so the sizes are a sawtooth, and a leak a slope.
func boundedFlat(t *testing.T, samples []boundedSample) {
	t.Helper()
	n := len(samples)
	mid, last := samples[n*2/5:n*7/10], samples[n*7/10:]
	peak := func(ss []boundedSample, f func(boundedSample) float64) float64 {
		return slices.Max(func() []float64 {
			out := make([]float64, len(ss))
			for i, s := range ss {
				out[i] = f(s)
			}
			return out
		}())
	}
	for _, c := range []struct {
		name   string
		f      func(boundedSample) float64
		factor float64
		slack  float64
	}{
		{"RSS", func(s boundedSample) float64 { return s.RSS }, 1.25, 8 << 20},
		{"goroutines", func(s boundedSample) float64 { return s.Goroutines }, 1, 20},
		{"connections", func(s boundedSample) float64 { return float64(s.Connections) }, 1, 2},
		{"table and index bytes", func(s boundedSample) float64 { b, _ := s.total(); return float64(b) }, 1.25, 4 << 20},
		{"dead tuples", func(s boundedSample) float64 { _, d := s.total(); return float64(d) }, 1.5, 20000},
	} {
		m, l := peak(mid, c.f), peak(last, c.f)
		if l > c.factor*m+c.slack {
			t.Errorf("%s grew: peak %.0f in the middle third, %.0f in the last", c.name, m, l)
		}
	}
}
