package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The ordering modes (worker only), scale situations beside the
// scale baseline of the same invocation (one endpoint, empty table).
const (
	modeOrderKeys    = "order-keys"
	modeOrderHot     = "order-hot"
	modeOrderBlocked = "order-blocked"
	// orderAlias stands for every ordering mode in -modes.
	orderAlias = "order"
)

// orderModes run only when -modes names them (or "order").
var orderModes = []string{modeOrderKeys, modeOrderHot, modeOrderBlocked}

// orderPerKey is how many events each key has in order-keys (-order-keys
// keys); blockedWaiting how many rows wait behind each blocked head.
const (
	orderPerKey    = 10
	blockedWaiting = 2
)

// OrderKeys is order-keys: the same rows drained without keys, then with
// -order-keys keys of orderPerKey events each.
type OrderKeys struct {
	Keys      int        `json:"keys"`
	Unordered ScaleDrain `json:"unordered"`
	Ordered   ScaleDrain `json:"ordered"`
}

// OrderHot is order-hot: one key's -order-hot events drained, and what the
// worker's own metrics say a cycle costs: the mean HTTP attempt, claim and
// outcome write of the run.
type OrderHot struct {
	Drain            ScaleDrain `json:"drain"`
	AttemptMS        float64    `json:"attempt_ms"`
	ClaimMS          float64    `json:"claim_ms"`
	RecordMS         float64    `json:"record_ms"`
	IdealPerSecond   float64    `json:"ideal_per_second"` // 1 / (attempt + claim + record)
	RatioToIdeal     float64    `json:"ratio_to_ideal"`
	ScrapeError      string     `json:"scrape_error,omitempty"`
	MeanCycleMS      float64    `json:"mean_cycle_ms"`          // 1 / drain rate
	SingleSlotPerSec float64    `json:"single_slot_per_second"` // unordered, WEBHOOK_CONCURRENCY=1, for reference
}

// OrderBlocked is order-blocked: -order-keys keys of the measured endpoint
// blocked behind heads whose retry is an hour away, blockedWaiting rows
// waiting behind each, while unordered events go to the same endpoint.
type OrderBlocked struct {
	Keys    int          `json:"keys"`
	Latency ScaleLatency `json:"latency"`
}

// ordered runs one ordering mode.
func (s scaler) ordered(ctx context.Context, mode string) error {
	// A mode that failed leaves no row: its error is printed instead.
	switch mode {
	case modeOrderKeys:
		k, err := s.orderKeys(ctx)
		if err == nil {
			s.sc.OrderKeys = k
		}
		return err
	case modeOrderHot:
		h, err := s.orderHot(ctx)
		if err == nil {
			s.sc.OrderHot = h
		}
		return err
	case modeOrderBlocked:
		b, err := s.orderBlocked(ctx)
		if err == nil {
			s.sc.OrderBlocked = b
		}
		return err
	}
	return fmt.Errorf("unknown ordering mode %q", mode)
}

// orderKeys drains keys × orderPerKey rows for one endpoint without keys,
// then the same rows with keys (each key's events inserted in order).
func (s scaler) orderKeys(ctx context.Context) (*OrderKeys, error) {
	out := &OrderKeys{Keys: s.opt.orderKeys}
	n := out.Keys * orderPerKey
	err := s.withEndpoints(ctx, []string{"one"}, false, nil, func(cons *endpointConsumer, ids map[string]string) error {
		for _, keyed := range []bool{false, true} {
			if err := s.sys.reset(ctx); err != nil {
				return fmt.Errorf("reset: %w", err)
			}
			keys := 0
			if keyed {
				keys = out.Keys
			}
			if err := s.insertKeyed(ctx, ids["one"], scaleDrainSeq, n, keys); err != nil {
				return err
			}
			d, _, err := s.drain(ctx, cons, []string{"one"}, n, scaleDrainSeq, nil)
			if err != nil {
				return err
			}
			if keyed {
				out.Ordered = d
			} else {
				out.Unordered = d
			}
		}
		return nil
	})
	return out, err
}

// orderHot drains one key's events, reading the worker's metrics before it
// stops, then the same number unordered with one slot, for reference.
func (s scaler) orderHot(ctx context.Context) (*OrderHot, error) {
	out := &OrderHot{}
	n := s.opt.orderHot
	err := s.withEndpoints(ctx, []string{"one"}, false, nil, func(cons *endpointConsumer, ids map[string]string) error {
		if err := s.insertKeyed(ctx, ids["one"], scaleDrainSeq, n, 1); err != nil {
			return err
		}
		// One key's events wait for each other: up to 50 ms each.
		var m samples
		var scrapeErr error
		var err error
		out.Drain, _, err = s.drainWith(ctx, cons, []string{"one"}, n, scaleDrainSeq, nil, drainRun{perRow: 50 * time.Millisecond,
			inspect: func(p *proc) { m, scrapeErr = scrape(ctx, p.metrics) }})
		if err != nil {
			return err
		}
		if scrapeErr != nil {
			out.ScrapeError = scrapeErr.Error()
		} else {
			out.AttemptMS = m.mean("fluxora_webhook_attempt_duration_seconds", `endpoint="one"`) * 1000
			out.ClaimMS = m.mean("fluxora_webhook_claim_duration_seconds", "") * 1000
			out.RecordMS = m.mean("fluxora_webhook_outcome_flush_duration_seconds", "") * 1000
			if cycle := out.AttemptMS + out.ClaimMS + out.RecordMS; cycle > 0 {
				out.IdealPerSecond = 1000 / cycle
				out.RatioToIdeal = out.Drain.PerSecond / out.IdealPerSecond
			}
		}
		if out.Drain.PerSecond > 0 {
			out.MeanCycleMS = 1000 / out.Drain.PerSecond
		}
		if err := s.sys.reset(ctx); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
		if err := s.insertKeyed(ctx, ids["one"], scaleDrainSeq, n, 0); err != nil {
			return err
		}
		one, _, err := s.drainWith(ctx, cons, []string{"one"}, n, scaleDrainSeq, nil,
			drainRun{env: []string{"WEBHOOK_CONCURRENCY=1"}, perRow: 50 * time.Millisecond})
		out.SingleSlotPerSec = one.PerSecond
		return err
	})
	return out, err
}

// orderBlocked blocks keys of the endpoint behind heads retried an hour
// from now, then measures the sparse latency of unordered events to it.
func (s scaler) orderBlocked(ctx context.Context) (*OrderBlocked, error) {
	out := &OrderBlocked{Keys: s.opt.orderKeys}
	err := s.withEndpoints(ctx, []string{"one"}, false, nil, func(cons *endpointConsumer, ids map[string]string) error {
		if err := s.insertKeyed(ctx, ids["one"], scaleStuckSeq, out.Keys*(1+blockedWaiting), out.Keys); err != nil {
			return err
		}
		// Each key's head "failed": its retry is an hour away.
		if _, err := s.pool.Exec(ctx, `UPDATE webhook_outbox SET created_at = now() + interval '1 hour'
			WHERE NOT processed AND endpoint_id = $1 AND ordering_key IS NOT NULL AND NOT held`, ids["one"]); err != nil {
			return fmt.Errorf("block the heads: %w", err)
		}
		if err := s.analyze(ctx, true); err != nil {
			return err
		}
		// As a real table's would be: the lanes' rows vacuumed (their
		// counters were updated three times each) and the setup written
		// out, so that neither autovacuum nor a checkpoint of the setup
		// runs beside the measurement.
		if _, err := s.pool.Exec(ctx, "VACUUM (ANALYZE) webhook_ordering_lanes"); err != nil {
			return fmt.Errorf("vacuum the lanes: %w", err)
		}
		if _, err := s.pool.Exec(ctx, "CHECKPOINT"); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		var err error
		out.Latency, _, err = s.latency(ctx, cons, "one", toEndpoint(ids["one"]), nil)
		return err
	})
	return out, err
}

// insertKeyed is insertQueue with keys: row g (from 0) has the key
// "k<g mod keys>" (keys 0: none), so each key's rows are inserted in order.
func (s scaler) insertKeyed(ctx context.Context, id string, first int64, n, keys int) error {
	t := time.Now().UnixNano()
	for from := 0; from < n; from += insertChunk {
		to := min(n, from+insertChunk)
		if _, err := s.pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, ordering_key)
			SELECT 'bench.event', jsonb_build_object('seq', $1::bigint + g, 't', $2::bigint), $3::uuid,
			       CASE WHEN $6::int > 0 THEN 'k' || (g % $6::int) END
			FROM generate_series($4::bigint, $5::bigint - 1) AS g ORDER BY g`,
			first, t, id, from, to, keys); err != nil {
			return fmt.Errorf("insert deliveries: %w", err)
		}
	}
	return s.analyze(ctx, false)
}

// drainOf is the drain figure of snap's receipts at the endpoints counted
// (n each wanted): deliveries over start to the last receipt.
func drainOf(snap endpointSnapshot, counted []string, n int, start time.Time) ScaleDrain {
	var last time.Time
	got := 0
	for _, name := range counted {
		for _, at := range snap.got[name] {
			got++
			if at.After(last) {
				last = at
			}
		}
	}
	d := ScaleDrain{Deliveries: got, Missing: n*len(counted) - got}
	if got > 0 {
		d.Elapsed = last.Sub(start)
		d.PerSecond = perSecond(got, d.Elapsed)
	}
	return d
}

// samples are a /metrics page's lines: name{labels} value.
type samples []string

// scrape reads url's /metrics page.
func scrape(ctx context.Context, url string) (samples, error) {
	if url == "" {
		return nil, errors.New("no metrics address")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out samples
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

// sum adds the values of the samples named name whose labels contain
// labels.
func (m samples) sum(name, labels string) float64 {
	total := 0.0
	for _, line := range m {
		key, val, ok := strings.Cut(line, " ")
		metric, lbl, _ := strings.Cut(key, "{")
		if !ok || metric != name || !strings.Contains(lbl, labels) {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			total += v
		}
	}
	return total
}

// mean is a histogram's _sum over its _count (0 when empty).
func (m samples) mean(histogram, labels string) float64 {
	if n := m.sum(histogram+"_count", labels); n > 0 {
		return m.sum(histogram+"_sum", labels) / n
	}
	return 0
}
