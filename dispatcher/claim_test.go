package dispatcher

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// What a claim returns besides rows to deliver: rows the worker cannot
// decode, unrouted events, fan-outs, reclaimed rows, and claim errors.
func TestClaimAnswers(t *testing.T) {
	t.Parallel()
	reclaimed := func(id int64) webhook.Delivery { r := tableRow(id, 2); r.Reclaimed = true; return r }
	for _, tc := range []struct {
		name    string
		steps   []claimStep
		metrics map[string]float64
		done    []int64 // rows delivered
		level   slog.Level
		log     string            // a record logged at level
		attrs   map[string]string // some of its attributes
	}{
		{
			name:  "broken rows dead-lettered: counted, their delivery ids logged",
			steps: []claimStep{{batch: webhook.Batch{Broken: []webhook.Broken{{ID: 1, DeliveryID: "d-1"}, {ID: 2, DeliveryID: "d-2"}}}}},
			metrics: map[string]float64{
				"fluxora_webhook_undecodable_rows_total": 2, "fluxora_webhook_claimed_batches_total": 0,
			},
			level: slog.LevelWarn, log: "rows the worker cannot decode moved to the dead letter",
			attrs: map[string]string{"rows": "2", "delivery_ids": "[d-1 d-2]"},
		},
		{
			name:    "broken rows not dead-lettered (BrokenErr): counted, logged as an error",
			steps:   []claimStep{{batch: webhook.Batch{Broken: []webhook.Broken{{ID: 3, DeliveryID: "d-3"}}, BrokenErr: errors.New("conn lost")}}},
			metrics: map[string]float64{"fluxora_webhook_undecodable_rows_total": 1},
			level:   slog.LevelError, log: "could not be dead-lettered",
			attrs: map[string]string{"rows": "1", "delivery_ids": "[d-3]", "error": "conn lost"},
		},
		{
			name:    "broken rows beside good ones: the good ones delivered",
			steps:   []claimStep{{batch: webhook.Batch{Rows: []webhook.Delivery{tableRow(1, 1)}, Taken: 1, Broken: []webhook.Broken{{ID: 9, DeliveryID: "d-9"}}}}},
			metrics: map[string]float64{"fluxora_webhook_undecodable_rows_total": 1, "fluxora_webhook_claimed_rows_total": 1},
			done:    []int64{1},
			level:   slog.LevelWarn, log: "rows the worker cannot decode", attrs: map[string]string{"delivery_ids": "[d-9]"},
		},
		{
			name:    "unrouted events: counted, each type logged once",
			steps:   []claimStep{{batch: webhook.Batch{Unrouted: []string{"a.b", "c.d", "a.b"}, Taken: 3}}},
			metrics: map[string]float64{"fluxora_webhook_events_unrouted_total": 3},
			level:   slog.LevelWarn, log: "recorded as unrouted",
			attrs: map[string]string{"events": "3", "event_types": "[a.b c.d]"},
		},
		{
			name: "a fan-out: counted, the rows it made claimed",
			steps: []claimStep{
				{batch: webhook.Batch{FannedOut: 2, Deliveries: 3, Taken: 2, More: true}},
				{batch: rowsOf(tableRow(1, 1), tableRow(2, 1), tableRow(3, 1))},
			},
			metrics: map[string]float64{
				"fluxora_webhook_events_fanned_out_total": 2, "fluxora_webhook_claimed_rows_total": 3,
				"fluxora_webhook_claimed_batches_total": 1,
			},
			done: []int64{1, 2, 3},
		},
		{
			name:  "rows whose lease expired: counted as reclaimed",
			steps: []claimStep{{batch: rowsOf(reclaimed(1), tableRow(2, 1), reclaimed(3))}},
			metrics: map[string]float64{
				"fluxora_webhook_leases_reclaimed_total": 2, "fluxora_webhook_claimed_rows_total": 3,
			},
			done:  []int64{1, 2, 3},
			level: slog.LevelWarn, log: "took over rows whose lease had expired", attrs: map[string]string{"rows": "2"},
		},
		{
			name: "a claim error: counted, logged, the claim tried again",
			steps: []claimStep{
				{err: errors.New("claim: conn refused")},
				{batch: rowsOf(tableRow(1, 1))},
			},
			metrics: map[string]float64{"fluxora_webhook_claim_errors_total": 1, "fluxora_webhook_claimed_rows_total": 1},
			done:    []int64{1},
			level:   slog.LevelWarn, log: "claim failed; trying again",
			attrs: map[string]string{"error": "claim: conn refused", "retry_in": "500ms"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{}
			st.push(tc.steps...)
			// No poll and no sweep: a claim error is retried by its own
			// timer.
			h := run(t, st, &fakeSender{}, Config{PollInterval: time.Hour, SweepInterval: time.Hour})
			waitUntil(t, "the script claimed, the rows recorded", func() bool {
				return st.stepsLeft() == 0 && st.has(tc.done...)
			})
			h.stop(t)
			for name, want := range tc.metrics {
				if got := metric(t, h.reg, name); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			if got := st.outcomes(t); len(got) != len(tc.done) {
				t.Errorf("outcomes %+v, want %v delivered", got, tc.done)
			}
			if tc.log == "" {
				return
			}
			recs := h.logs.find(tc.log)
			if len(recs) != 1 || recs[0].level != tc.level {
				t.Fatalf("logs %q: %+v, want one at %v", tc.log, recs, tc.level)
			}
			for k, v := range tc.attrs {
				if recs[0].attrs[k] != v {
					t.Errorf("log %q: %s=%q, want %q", tc.log, k, recs[0].attrs[k], v)
				}
			}
		})
	}
}

// An endpoint holds at most its limit (EndpointConcurrency to start with):
// rows over it within a batch are given back unattempted, and later claims
// leave out the endpoints with no room and give the others their room.
func TestEndpointCap(t *testing.T) {
	t.Parallel()
	rowOf := func(id int64, ep string) webhook.Delivery {
		r := tableRow(id, 1)
		r.EndpointID, r.EndpointName = ep, "name-"+ep
		if ep == "" {
			r.EndpointName = ""
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		env    bool // EnvEndpoint
		rows   []webhook.Delivery
		sent   []int64
		capped []int64
		label  string // the capped rows' endpoint label
		first  webhook.Query
		later  webhook.Query // every claim while the sends hang
	}{
		{
			name:   "two table endpoints: the third row of a is given back, a skipped, b given its room",
			rows:   []webhook.Delivery{rowOf(1, "a"), rowOf(2, "a"), rowOf(3, "a"), rowOf(4, "b")},
			sent:   []int64{1, 2, 4},
			capped: []int64{3}, label: "name-a",
			first: webhook.Query{Limit: 10, DefaultRoom: 2, SkipEnv: true},
			later: webhook.Query{Limit: 7, Skip: []string{"a"}, Room: map[string]int{"b": 1}, DefaultRoom: 2, SkipEnv: true},
		},
		{
			name:   "WEBHOOK_URL and one table endpoint: WEBHOOK_URL's third row given back, its rows skipped",
			env:    true,
			rows:   []webhook.Delivery{rowOf(1, ""), rowOf(2, ""), rowOf(3, ""), rowOf(4, "b")},
			sent:   []int64{1, 2, 4},
			capped: []int64{3}, label: DefaultEndpointName,
			first: webhook.Query{Limit: 10, DefaultRoom: 2, EnvRoom: 2},
			later: webhook.Query{Limit: 7, Room: map[string]int{"b": 1}, DefaultRoom: 2, SkipEnv: true},
		},
		{
			name:   "one endpoint alone starts at its limit too (it grows with its 2xx, TestAdaptiveLimit)",
			rows:   []webhook.Delivery{rowOf(1, "a"), rowOf(2, "a"), rowOf(3, "a")},
			sent:   []int64{1, 2},
			capped: []int64{3}, label: "name-a",
			first: webhook.Query{Limit: 10, DefaultRoom: 2, SkipEnv: true},
			later: webhook.Query{Limit: 8, Skip: []string{"a"}, DefaultRoom: 2, SkipEnv: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			snd, started, release := blocking()
			st := &fakeStore{}
			st.push(claimStep{batch: rowsOf(tc.rows...)})
			h := run(t, st, snd, Config{Concurrency: 10, BatchSize: 10, EndpointConcurrency: 2, EnvEndpoint: tc.env, Now: time.Now})
			// Every claim leases for LeaseDefault and says whether there is a
			// WEBHOOK_URL endpoint.
			tc.first.Lease, tc.first.Env = LeaseDefault, tc.env
			tc.later.Lease, tc.later.Env = LeaseDefault, tc.env
			if got := receive(t, started, len(tc.sent)); !slices.Equal(got, tc.sent) {
				t.Fatalf("sent %v, want %v", got, tc.sent)
			}
			waitUntil(t, "the capped rows given back and claims made while the sends hang, the last with their slots back", func() bool {
				q := st.claimQueries()
				return st.has(tc.capped...) && len(q) >= 3 && equalQuery(q[len(q)-1], tc.later)
			})
			queries := st.claimQueries()
			close(release)
			waitUntil(t, "the sent rows recorded", func() bool { return st.has(tc.sent...) })
			h.stop(t)

			if !equalQuery(queries[0], tc.first) {
				t.Errorf("first claim %+v, want %+v", queries[0], tc.first)
			}
			// A claim made soon after the first may come before the capped
			// rows' slots are handed back: its limit is then lower by as
			// many; every claim is otherwise the same (and the last one
			// waited for has them back).
			for i, q := range queries[1:] {
				lower := q
				if q.Limit < tc.later.Limit && q.Limit >= tc.later.Limit-len(tc.capped) {
					lower.Limit = tc.later.Limit
				}
				if !equalQuery(lower, tc.later) {
					t.Errorf("claim %d of %d while the sends hang: %+v, want %+v", i+2, len(queries), q, tc.later)
				}
			}
			got := st.outcomes(t)
			for _, id := range tc.capped {
				if got[id].Kind != webhook.Release || got[id].Health != webhook.NoAttempt {
					t.Errorf("capped row %d: %+v, want released, no attempt", id, got[id])
				}
			}
			for _, id := range tc.sent {
				if got[id].Kind != webhook.Done {
					t.Errorf("row %d: %+v, want done", id, got[id])
				}
			}
			if sent := snd.sentIDs(); !slices.Equal(sent, tc.sent) {
				t.Errorf("sent %v, want %v (a capped row is never sent)", sent, tc.sent)
			}
			if tc.label != "" {
				if v := metric(t, h.reg, "fluxora_webhook_endpoint_cap_waits_total", "endpoint", tc.label); v != float64(len(tc.capped)) {
					t.Errorf("endpoint_cap_waits_total{endpoint=%q} = %v, want %v", tc.label, v, len(tc.capped))
				}
			}
			if v := metric(t, h.reg, "fluxora_webhook_endpoint_cap_waits_total"); v != float64(len(tc.capped)) {
				t.Errorf("endpoint_cap_waits_total = %v, want %v", v, len(tc.capped))
			}
			// Today a capped row counts in rows_released_total too (its
			// help says "at shutdown"), but not in the shutdown log line.
			if v := metric(t, h.reg, "fluxora_webhook_rows_released_total"); v != float64(len(tc.capped)) {
				t.Errorf("rows_released_total = %v, want %v", v, len(tc.capped))
			}
			if recs := h.logs.find("released rows not started"); len(recs) != 0 {
				t.Errorf("capped rows logged as released at shutdown: %+v", recs)
			}
		})
	}
}

func equalQuery(a, b webhook.Query) bool {
	return a.Limit == b.Limit && a.Lease == b.Lease && a.Env == b.Env && a.SkipEnv == b.SkipEnv && slices.Equal(a.Skip, b.Skip) && a.DefaultRoom == b.DefaultRoom &&
		a.EnvRoom == b.EnvRoom && maps.Equal(a.Room, b.Room)
}

// BatchSize bounds the first claim after a quiet moment; while claims
// leave rows (a full claim, or More), the next takes every free slot; a
// claim that leaves nothing, or finds nothing, brings BatchSize back.
func TestClaimSize(t *testing.T) {
	t.Parallel()
	rows := func(from, to int64) []webhook.Delivery {
		var out []webhook.Delivery
		for id := from; id <= to; id++ {
			out = append(out, tableRow(id, 1))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		steps  []claimStep
		sent   int
		limits []int // of the first claims
	}{
		{
			name: "full, then More, then less than asked and no More",
			steps: []claimStep{
				{batch: rowsOf(rows(1, 10)...)},
				{batch: webhook.Batch{Rows: rows(11, 15), Taken: 5, More: true}},
				{batch: rowsOf(rows(16, 17)...)},
			},
			sent: 17, limits: []int{10, 90, 85, 10},
		},
		{
			name:  "full, then nothing",
			steps: []claimStep{{batch: rowsOf(rows(1, 10)...)}, {}},
			sent:  10, limits: []int{10, 90, 10},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			snd, started, release := blocking()
			st := &fakeStore{}
			st.push(tc.steps...)
			h := run(t, st, snd, Config{Concurrency: 100, BatchSize: 10, EndpointConcurrency: 100})
			receive(t, started, tc.sent)
			waitUntil(t, "the claims", func() bool { return len(st.claimQueries()) >= len(tc.limits) })
			close(release)
			waitUntil(t, "the rows recorded", func() bool { return st.has(1, int64(tc.sent)) })
			h.stop(t)
			var limits []int
			for _, q := range st.claimQueries()[:len(tc.limits)] {
				limits = append(limits, q.Limit)
			}
			if !slices.Equal(limits, tc.limits) {
				t.Errorf("claim limits %v, want %v", limits, tc.limits)
			}
		})
	}
}
