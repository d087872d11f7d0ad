package dispatcher

import (
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// activeFor is how long an endpoint whose rows were claimed counts as
// wanting slots: while another endpoint does, an endpoint keeps at most
// Concurrency − EndpointConcurrency of them (see capOf).
const activeFor = 10 * time.Second

// slotDone is what a delivery goroutine reports when it gives its slot
// back: the endpoint, what the attempt says of the endpoint's load, when
// the row was started, and how long a gate asked to park the endpoint.
type slotDone struct {
	endpoint string
	label    string // the endpoint's metric label
	signal   signal
	started  time.Time
	parkFor  time.Duration
}

// signal is what one attempt says to an endpoint's adaptive limit.
type signal int

const (
	noSignal signal = iota
	answered        // a 2xx: the endpoint keeps up
	overload        // a timeout, a 5xx, a refused connection
)

// signalOf reads an outcome: a healthy attempt grows the endpoint's limit,
// a retryable failure shrinks it; a permanent one (a 4xx) says nothing of
// its load.
func signalOf(o webhook.Outcome) signal {
	switch {
	case o.Health == webhook.Healthy:
		return answered
	case o.Health == webhook.Failing && o.AttemptClass == webhook.Retryable.String():
		return overload
	}
	return noSignal
}

// limitOf is endpoint id's adaptive limit (AIMD, as TCP's window): it starts
// at EndpointConcurrency, grows by one per 2xx up to Concurrency, and halves
// (at least 1) on a retryable failure, once per generation of requests (a
// failure of a request started before the last cut does not cut again).
func (d *Dispatcher) limitOf(id string) int {
	if l, ok := d.limits[id]; ok {
		return l
	}
	return d.cfg.EndpointConcurrency
}

// adapt applies what a finished slot says of its endpoint.
func (d *Dispatcher) adapt(s slotDone) {
	l := d.limitOf(s.endpoint)
	switch s.signal {
	case answered:
		l = min(l+1, d.cfg.Concurrency)
	case overload:
		if s.started.Before(d.cut[s.endpoint]) {
			break
		}
		l = max(1, l/2)
		d.cut[s.endpoint] = d.cfg.Now()
		d.m.limitCuts.WithLabelValues(s.label).Inc()
	}
	if l == d.cfg.EndpointConcurrency {
		delete(d.limits, s.endpoint) // as good as unknown
	} else {
		d.limits[s.endpoint] = l
	}
	if s.parkFor > 0 {
		until := d.cfg.Now().Add(s.parkFor)
		if until.After(d.parked[s.endpoint]) {
			d.parked[s.endpoint] = until
			d.m.parks.WithLabelValues(s.label).Inc()
		}
		d.armDue(s.parkFor)
	}
}

// capOf is the most slots endpoint id may hold now: its limit, and, while
// another endpoint wants slots (holds some, or had rows claimed within
// activeFor), no more than what the others leave, EndpointConcurrency kept
// for them at least. Never less than EndpointConcurrency but for its limit:
// an endpoint alone uses every slot; beside others it is bounded only by
// what they actually hold (work-conserving), and one that hangs holds at
// most what its limit has fallen to.
func (d *Dispatcher) capOf(id string, active int) int {
	others := d.inflight - d.held[id]
	if active-d.isActive(id) > 0 {
		others = max(others, d.cfg.EndpointConcurrency)
	}
	return min(d.limitOf(id), max(d.cfg.EndpointConcurrency, d.cfg.Concurrency-others))
}

func (d *Dispatcher) isActive(id string) int {
	if d.held[id] > 0 || d.cfg.Now().Sub(d.active[id]) < activeFor {
		return 1
	}
	return 0
}

// activeCount counts the endpoints that want slots, and forgets those that
// stopped wanting them.
func (d *Dispatcher) activeCount() int {
	now := d.cfg.Now()
	n := 0
	for id, at := range d.active {
		if now.Sub(at) >= activeFor && d.held[id] == 0 {
			delete(d.active, id)
			continue
		}
		n++
	}
	for id := range d.held {
		if _, ok := d.active[id]; !ok {
			n++
		}
	}
	return n
}

// parkedAt says whether endpoint id is parked at now.
func (d *Dispatcher) parkedAt(id string, now time.Time) bool {
	until, ok := d.parked[id]
	return ok && now.Before(until)
}

// query is the next claim: at most limit rows, leased for Lease; of each
// endpoint at most its room (capOf less what it holds); none of the
// endpoints with no room or parked (their rows are not read).
func (d *Dispatcher) query(limit int) webhook.Query {
	now := d.cfg.Now()
	q := webhook.Query{Limit: limit, Lease: d.cfg.Lease, Env: d.cfg.EnvEndpoint, Room: map[string]int{}, SkipEnv: !d.cfg.EnvEndpoint,
		EnvFlow: d.cfg.EnvFlow}
	active := d.activeCount()
	room := func(id string) int {
		if d.parkedAt(id, now) {
			return 0
		}
		delete(d.parked, id) // a park that ended, if any
		return d.capOf(id, active) - d.held[id]
	}
	seen := map[string]bool{}
	for _, ids := range []map[string]int{d.held, d.limits} {
		for id := range ids {
			if seen[id] || id == "" {
				continue
			}
			seen[id] = true
			if r := room(id); r > 0 {
				q.Room[id] = r
			} else {
				q.Skip = append(q.Skip, id)
			}
		}
	}
	for id := range d.parked {
		if !seen[id] && id != "" && room(id) <= 0 {
			q.Skip = append(q.Skip, id)
		}
	}
	// An endpoint this worker knows nothing of holds nothing and has the
	// starting limit.
	q.DefaultRoom = d.cfg.EndpointConcurrency
	if d.cfg.EnvEndpoint {
		if r := room(""); r > 0 {
			q.EnvRoom = r
		} else {
			q.SkipEnv = true
		}
	}
	return q
}
