package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// These benchmarks measure the NOTIFY path (README, "Speed"). They report
// percentiles as custom metrics; run them with
//
//	go test ./cmd/worker -run '^$' -bench . -benchtime 1x
//
// The full side-by-side comparison with River is the bench/ module.

// BenchmarkSparseLatency inserts one event every 10 ms (poll interval 10 s,
// the default) and reports insert-start to consumer-receipt percentiles.
func BenchmarkSparseLatency(b *testing.B) {
	db := testdb.New(b)
	recv := newReceiptConsumer(b)
	startInProcess(b, baseEnv(db, recv.c, map[string]string{"WEBHOOK_POLL_INTERVAL_MS": "10000", "LOG_LEVEL": "warn"}))
	const events = 300
	b.ResetTimer()
	for range b.N {
		recv.reset()
		tick := time.NewTicker(10 * time.Millisecond)
		for i := range events {
			<-tick.C
			start := time.Now().UnixNano()
			if _, err := db.Pool.Exec(context.Background(), "INSERT INTO webhook_outbox (event_type, payload) VALUES ('bench', $1)",
				fmt.Sprintf(`{"seq":%d,"t":%d}`, i, start)); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		recv.wait(b, events, 30*time.Second)
	}
	b.StopTimer()
	reportPercentiles(b, recv.latencies())
}

// BenchmarkProducerCost runs 8 producers inserting single-row transactions
// with the worker running, alternating trigger enabled and disabled, and
// reports the throughput ratio enabled/disabled (target >= 0.90).
func BenchmarkProducerCost(b *testing.B) {
	db := testdb.New(b)
	recv := newReceiptConsumer(b)
	startInProcess(b, baseEnv(db, recv.c, map[string]string{"WEBHOOK_POLL_INTERVAL_MS": "10000", "LOG_LEVEL": "warn"}))
	pool, err := pgxpool.New(context.Background(), db.URL+"&pool_max_conns=8")
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var on, off float64
	for range b.N {
		for _, enabled := range []bool{true, false, true, false, true, false} {
			stmt := "ALTER TABLE webhook_outbox DISABLE TRIGGER webhook_outbox_notify"
			if enabled {
				stmt = "ALTER TABLE webhook_outbox ENABLE TRIGGER webhook_outbox_notify"
			}
			if _, err := db.Pool.Exec(context.Background(), stmt); err != nil {
				b.Fatal(err)
			}
			rate := insertRate(b, pool, 8, 2*time.Second)
			if enabled {
				on += rate
			} else {
				off += rate
			}
		}
	}
	b.ReportMetric(on/3/float64(b.N), "enabled-commits/s")
	b.ReportMetric(off/3/float64(b.N), "disabled-commits/s")
	b.ReportMetric(on/off, "ratio")
}

func insertRate(b *testing.B, pool *pgxpool.Pool, producers int, d time.Duration) float64 {
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if _, err := pool.Exec(context.Background(), "INSERT INTO webhook_outbox (event_type, payload) VALUES ('cost', '{}')"); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds()
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		b.Fatal("no latencies")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.90), "p90-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// receiptConsumer records, per event, consumer receipt minus the insert
// start carried in the payload.
type receiptConsumer struct {
	c *consumer
}

func newReceiptConsumer(b *testing.B) *receiptConsumer {
	return &receiptConsumer{c: newConsumer(b, nil)}
}

func (r *receiptConsumer) reset() {
	r.c.mu.Lock()
	r.c.got = nil
	r.c.mu.Unlock()
}

func (r *receiptConsumer) wait(b *testing.B, n int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for len(r.c.deliveries()) < n {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d delivered", len(r.c.deliveries()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *receiptConsumer) latencies() []time.Duration {
	var out []time.Duration
	for _, d := range r.c.deliveries() {
		var p struct{ T int64 }
		if json.Unmarshal(d.Body, &p) == nil && p.T > 0 {
			out = append(out, d.At.Sub(time.Unix(0, p.T)))
		}
	}
	return out
}
