package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// An endpoint held at its cap while other slots stay free is claimed for
// again as soon as one of its slots is given back, not at the next recheck
// or sweep: once the rechecks after its rows have run out (sweep and poll
// an hour away), giving back one of its two slots (its 2xx also grows its
// limit) brings a claim with room for it. Were the loop to claim again
// only when no slot at all was free, a backlogged endpoint beside others
// would drain at the rechecks' pace, not its consumer's.
func TestCappedEndpointClaimedAsItsSlotsFree(t *testing.T) {
	t.Parallel()
	a1, a2 := tableRow(1, 1), tableRow(2, 1)
	a1.EndpointID, a2.EndpointID = "a", "a"
	releases := map[int64]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
	started := make(chan int64, 2)
	snd := &fakeSender{fn: func(ctx context.Context, r webhook.Delivery) webhook.Result {
		started <- r.ID
		select {
		case <-releases[r.ID]:
			return webhook.Result{Class: webhook.Delivered, Status: 200}
		case <-ctx.Done():
			return webhook.Result{Class: webhook.Retryable, Error: ctx.Err().Error()}
		}
	}}
	st := &fakeStore{}
	st.push(claimStep{batch: rowsOf(a1, a2)})
	h := run(t, st, snd, Config{Concurrency: 10, BatchSize: 10, EndpointConcurrency: 2, Now: time.Now,
		SweepInterval: time.Hour, PollInterval: time.Hour})
	receive(t, started, 2)
	// The claim that found the rows, then one per recheck delay, each with
	// a skipped: at its cap.
	claims := 1 + len(recheckDelays)
	waitUntil(t, "the rechecks after the rows have run out", func() bool { return len(st.claimQueries()) >= claims })
	for i, q := range st.claimQueries()[1:] {
		if len(q.Skip) != 1 || q.Skip[0] != "a" {
			t.Fatalf("claim %d while a holds its cap: %+v, want a skipped", i+2, q)
		}
	}
	close(releases[1])
	waitUntil(t, "a claim with room for a, once one of its slots is back", func() bool {
		q := st.claimQueries()
		return len(q) > claims && q[claims].Room["a"] > 0
	})
	if q := st.claimQueries()[claims]; len(q.Skip) != 0 {
		t.Errorf("claim after a's slot came back: %+v, want a not skipped", q)
	}
	close(releases[2])
	waitUntil(t, "both rows recorded", func() bool { return st.has(1, 2) })
	h.stop(t)
}

// cappedBy counts an endpoint skipped with slots of its own in flight, not
// one that holds none (its rows wait for no slot of this worker) nor one
// parked by a gate (its park's end wakes the loop).
func TestCappedBy(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name   string
		env    bool
		held   map[string]int
		parked map[string]time.Time
		q      webhook.Query
		want   bool
	}{
		{name: "skipped, holding slots", held: map[string]int{"a": 2}, q: webhook.Query{Skip: []string{"a"}}, want: true},
		{name: "skipped, holding none", held: map[string]int{"b": 2}, q: webhook.Query{Skip: []string{"a"}}},
		{name: "holding slots, not skipped", held: map[string]int{"a": 1}, q: webhook.Query{Room: map[string]int{"a": 1}}},
		{name: "skipped, holding slots, parked", held: map[string]int{"a": 2}, parked: map[string]time.Time{"a": now.Add(time.Minute)},
			q: webhook.Query{Skip: []string{"a"}}},
		{name: "skipped, holding slots, park over", held: map[string]int{"a": 2}, parked: map[string]time.Time{"a": now.Add(-time.Second)},
			q: webhook.Query{Skip: []string{"a"}}, want: true},
		{name: "WEBHOOK_URL skipped, holding slots", env: true, held: map[string]int{"": 3}, q: webhook.Query{SkipEnv: true}, want: true},
		{name: "WEBHOOK_URL skipped, holding none", env: true, q: webhook.Query{SkipEnv: true}},
		{name: "no WEBHOOK_URL endpoint", held: map[string]int{"": 3}, q: webhook.Query{SkipEnv: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Dispatcher{cfg: Config{EnvEndpoint: tc.env, Now: func() time.Time { return now }},
				held: tc.held, parked: tc.parked}
			if d.held == nil {
				d.held = map[string]int{}
			}
			if d.parked == nil {
				d.parked = map[string]time.Time{}
			}
			if got := d.cappedBy(tc.q); got != tc.want {
				t.Errorf("cappedBy(%+v) with held %v, parked %v = %v, want %v", tc.q, tc.held, tc.parked, got, tc.want)
			}
		})
	}
}

// A claim that fills an endpoint's whole room (fewer rows than its limit,
// but as many as the endpoint may hold) leaves it capped with rows very
// likely left: the next claim takes every free slot, as after a full
// claim, not a first-claim batch. Beside an endpoint that wants slots, an
// endpoint's room is below the free slots, and sizing that claim by the
// batch cost a claim of a batch, then one of the rest, per cycle.
func TestClaimThatFillsARoomSizesTheNextByTheFreeSlots(t *testing.T) {
	t.Parallel()
	a1, a2 := tableRow(1, 1), tableRow(2, 1)
	a1.EndpointID, a2.EndpointID = "a", "a"
	snd, _, release := blocking()
	st := &fakeStore{}
	st.push(claimStep{batch: rowsOf(a1, a2)})
	h := run(t, st, snd, Config{Concurrency: 10, BatchSize: 3, EndpointConcurrency: 2, Now: time.Now,
		SweepInterval: time.Hour, PollInterval: time.Hour})
	waitUntil(t, "a claim after the one that filled a's room", func() bool { return len(st.claimQueries()) >= 2 })
	q := st.claimQueries()
	if q[0].Limit != 3 {
		t.Fatalf("first claim: limit %d, want the batch size 3", q[0].Limit)
	}
	if q[1].Limit != 8 {
		t.Errorf("claim after a's room was filled: limit %d, want every free slot (8)", q[1].Limit)
	}
	close(release)
	waitUntil(t, "both rows recorded", func() bool { return st.has(1, 2) })
	h.stop(t)
}
