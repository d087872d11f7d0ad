package dispatcher

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/webhook"
)

// newIdle is a dispatcher that is not running, for its scheduling state.
func newIdle(t *testing.T, cfg Config) *Dispatcher {
	t.Helper()
	cfg.Store, cfg.Sender, cfg.Wake = &fakeStore{}, &fakeSender{}, make(chan struct{})
	cfg.Registerer, cfg.Rand = prometheus.NewRegistry(), func() float64 { return 0.5 }
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// hold makes d hold n slots of each endpoint, as claimed rows do.
func hold(d *Dispatcher, held map[string]int) {
	for id, n := range held {
		d.held[id] += n
		d.inflight += n
		d.active[id] = d.cfg.Now()
	}
}

// A claim gives each endpoint this worker holds its room (its cap less what
// it holds), leaves out those with none and those parked, and gives any
// other endpoint the starting limit. The cap is work-conserving: an
// endpoint alone may hold every slot its limit allows, and beside others it
// leaves them what they hold, EndpointConcurrency at least.
func TestQueryRespectsEndpointRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		limits  map[string]int
		held    map[string]int
		parked  []string
		want    webhook.Query
		envRoom int
	}{
		{name: "nothing held", want: webhook.Query{Limit: 10, DefaultRoom: 25}, envRoom: 25},
		{name: "alone at the limit grown to every slot: all the free ones",
			limits: map[string]int{"a": 100}, held: map[string]int{"a": 60},
			want: webhook.Query{Limit: 10, Room: map[string]int{"a": 40}, DefaultRoom: 25}, envRoom: 25},
		{name: "beside another: leaves it EndpointConcurrency, or what it holds if more",
			limits: map[string]int{"a": 100}, held: map[string]int{"a": 60, "b": 5},
			want: webhook.Query{Limit: 10, Room: map[string]int{"a": 15, "b": 20}, DefaultRoom: 25}, envRoom: 25},
		{name: "others hold most slots: a gets what they leave; those at their limit none",
			limits: map[string]int{"a": 100}, held: map[string]int{"a": 25, "b": 25, "c": 45},
			want: webhook.Query{Limit: 10, Skip: []string{"b", "c"}, Room: map[string]int{"a": 5}, DefaultRoom: 25}, envRoom: 25},
		{name: "a limit cut to 1 while it holds 1: skipped, unread",
			limits: map[string]int{"a": 1}, held: map[string]int{"a": 1, "": 3},
			want: webhook.Query{Limit: 10, Skip: []string{"a"}, Room: map[string]int{}, DefaultRoom: 25}, envRoom: 22},
		{name: "a cut limit with nothing held still bounds the endpoint",
			limits: map[string]int{"a": 3},
			want:   webhook.Query{Limit: 10, Room: map[string]int{"a": 3}, DefaultRoom: 25}, envRoom: 25},
		{name: "parked: skipped until its time, the WEBHOOK_URL one too",
			parked: []string{"a", ""},
			want:   webhook.Query{Limit: 10, Skip: []string{"a"}, DefaultRoom: 25, SkipEnv: true}, envRoom: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newIdle(t, Config{Concurrency: 100, BatchSize: 10, EnvEndpoint: true, Now: fixedNow})
			maps.Copy(d.limits, tc.limits)
			hold(d, tc.held)
			for _, id := range tc.parked {
				d.parked[id] = t0.Add(time.Second)
			}
			got := d.query(10)
			slices.Sort(got.Skip)
			want := tc.want
			want.EnvRoom, want.Lease, want.Env = tc.envRoom, LeaseDefault, true
			if want.EnvRoom == 0 {
				want.SkipEnv = true
			}
			if !equalQuery(got, want) {
				t.Fatalf("query(10) = %+v, want %+v", got, want)
			}
		})
	}
	d := newIdle(t, Config{Concurrency: 100, EnvEndpoint: false, Now: fixedNow})
	if q := d.query(10); !q.SkipEnv || q.EnvRoom != 0 {
		t.Fatalf("no WEBHOOK_URL endpoint: its rows must be left to a worker that has one: %+v", q)
	}
	var now time.Time
	d = newIdle(t, Config{Concurrency: 100, EnvEndpoint: true, Now: func() time.Time { return now }})
	now = t0
	d.parked["a"] = t0.Add(time.Second)
	now = t0.Add(time.Second)
	if q := d.query(10); len(q.Skip) != 0 || len(d.parked) != 0 {
		t.Fatalf("a park whose time has come still skips: %+v, parked %v", q, d.parked)
	}
}

// An endpoint's limit grows by one per 2xx up to Concurrency, halves on a
// retryable failure once per generation of requests (at least 1), ignores
// 4xx, and a gate's deferral parks the endpoint for the deferral.
func TestAdaptiveLimit(t *testing.T) {
	t.Parallel()
	var now time.Time
	d := newIdle(t, Config{Concurrency: 8, EndpointConcurrency: 2, Now: func() time.Time { return now }})
	now = t0
	done := func(sig signal, started time.Time) {
		d.adapt(slotDone{endpoint: "a", label: "a", signal: sig, started: started})
	}
	for _, step := range []struct {
		name    string
		signal  signal
		started time.Duration // after t0
		want    int
	}{
		{"a 2xx", answered, 0, 3},
		{"another", answered, 0, 4},
		{"a 4xx says nothing of the load", noSignal, 0, 4},
		{"a timeout halves it", overload, 0, 2},
		{"a failure of a request started before that cut does not cut again", overload, -2 * time.Millisecond, 2},
		{"one started after it does", overload, time.Millisecond, 1},
		{"never below 1", overload, 2 * time.Millisecond, 1},
		{"2xx grow it back", answered, 0, 2},
	} {
		now = now.Add(time.Millisecond)
		done(step.signal, now.Add(step.started))
		if got := d.limitOf("a"); got != step.want {
			t.Fatalf("%s: limit %d, want %d", step.name, got, step.want)
		}
	}
	for range 20 {
		done(answered, now)
	}
	if got := d.limitOf("a"); got != 8 {
		t.Fatalf("after many 2xx: limit %d, want Concurrency 8", got)
	}
	if v := metric(t, d.cfg.Registerer.(prometheus.Gatherer), "fluxora_webhook_endpoint_limit_cuts_total", "endpoint", "a"); v != 3 {
		t.Fatalf("limit cuts %v, want 3", v)
	}
	d.adapt(slotDone{endpoint: "a", label: "a", parkFor: 5 * time.Second})
	if q := d.query(10); !slices.Equal(q.Skip, []string{"a"}) || !d.dueAt.Equal(now.Add(5*time.Second)) {
		t.Fatalf("parked: query %+v, wake at %v", q, d.dueAt)
	}
	now = now.Add(5 * time.Second)
	if q := d.query(10); len(q.Skip) != 0 || q.Room["a"] != 8 {
		t.Fatalf("after the park: %+v", q)
	}
}
