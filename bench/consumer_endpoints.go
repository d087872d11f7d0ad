package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// endpoint is one loopback webhook endpoint of the endpoint modes, as the
// bench inserts it into webhook_endpoints.
type endpoint struct {
	name   string // webhook_endpoints.name, sent back as x-fluxora-endpoint
	secret []byte // its own signing secret
	url    string // http://127.0.0.1:PORT/...
}

// endpointConsumer serves many endpoints on 127.0.0.1 only: either each on
// a port of its own (the noisy mode) or all on one port, told apart by the
// URL path /ep/<i> (the fanout mode). Each endpoint verifies its requests
// with its own secret and that x-fluxora-endpoint names it, answers 200 at
// once (or, for the endpoints the run says hang, never), and records the
// receipt time by endpoint and payload seq.
type endpointConsumer struct {
	endpoints []*endpoint
	srvs      []*http.Server

	badSignatures atomic.Int64 // over the consumer's whole life
	misrouted     atomic.Int64 // x-fluxora-endpoint is not the endpoint's name

	mu     sync.Mutex
	run    *endpointRun
	limits map[string]apiLimit // by endpoint name (consumer_limit.go)
}

// endpointRun is one measured run's record.
type endpointRun struct {
	floor int64 // events with a lower seq belong to an earlier run: answered, not recorded
	hang  map[string]bool
	// ctx ends with the run: every hung request then ends without an answer.
	ctx    context.Context
	cancel context.CancelFunc
	got    map[string]map[int64]time.Time // receipt time by endpoint name and seq
	ins    map[int64]time.Time            // the payload's insert start, by seq
	dups   int                            // 200-answered requests for an already delivered (endpoint, seq)
	hung   map[string]int                 // requests left unanswered, by endpoint
	open   map[string]int                 // requests waiting for their answer now, by endpoint
	peak   map[string]int                 // the most of them at once, by endpoint
	// buckets are the limited endpoints' token buckets; refused counts the
	// requests their limits answered 429, by endpoint.
	buckets map[string]*bucket
	refused map[string]int
	// counted are the endpoints await waits for; n counts their receipts.
	counted map[string]bool
	n, want int
	done    chan struct{}
}

// newEndpointConsumer starts one endpoint per name, each with a fresh
// random secret; shared puts them all on one port.
func newEndpointConsumer(names []string, shared bool) (*endpointConsumer, error) {
	c := &endpointConsumer{}
	c.reset(0, nil)
	var mux *http.ServeMux
	for i, name := range names {
		ep := &endpoint{name: name, secret: randomSecret()}
		c.endpoints = append(c.endpoints, ep)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serve(ep, w, r) })
		if shared {
			if mux == nil {
				mux = http.NewServeMux()
				if err := c.listen(mux); err != nil {
					c.Close()
					return nil, err
				}
			}
			ep.url = c.base(0) + "/ep/" + strconv.Itoa(i)
			mux.Handle("/ep/"+strconv.Itoa(i), h)
			continue
		}
		if err := c.listen(h); err != nil {
			c.Close()
			return nil, err
		}
		ep.url = c.base(len(c.srvs)-1) + "/webhook"
	}
	return c, nil
}

// randomSecret is a whsec_-style secret of 32 random bytes.
func randomSecret() []byte {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return []byte("whsec_bench_" + hex.EncodeToString(b[:]))
}

// listen serves h on a free port of 127.0.0.1.
func (c *endpointConsumer) listen(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("endpoint consumer: %w", err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Minute}
	c.srvs = append(c.srvs, srv)
	go func() { _ = srv.Serve(ln) }()
	return nil
}

func (c *endpointConsumer) base(i int) string { return "http://" + c.srvs[i].Addr }

// Close ends the requests still waiting for an answer and stops the servers.
func (c *endpointConsumer) Close() {
	c.mu.Lock()
	c.run.cancel()
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range c.srvs {
		_ = srv.Shutdown(ctx)
	}
}

// reset starts a new run that records events with seq >= floor and leaves
// every request to the endpoints in hang unanswered. Earlier receipts are
// forgotten and the previous run's hung requests end without an answer.
func (c *endpointConsumer) reset(floor int64, hang map[string]bool) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run != nil {
		c.run.cancel()
	}
	c.run = &endpointRun{floor: floor, hang: hang, ctx: ctx, cancel: cancel,
		got: map[string]map[int64]time.Time{}, ins: map[int64]time.Time{},
		hung: map[string]int{}, open: map[string]int{}, peak: map[string]int{},
		buckets: map[string]*bucket{}, refused: map[string]int{}, done: make(chan struct{})}
}

func (c *endpointConsumer) serve(ep *endpoint, w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if !(&consumer{secret: ep.secret}).verify(r.Header, body, at) { // the single consumer's check, this endpoint's secret
		c.badSignatures.Add(1)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	if r.Header.Get("X-Fluxora-Endpoint") != ep.name {
		c.misrouted.Add(1)
		http.Error(w, "wrong endpoint", http.StatusBadRequest)
		return
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	if !c.admit(ep.name, at) {
		refuse(w)
		return
	}
	run, hang := c.arrive(ep.name)
	if hang {
		// Never answered: the handler blocks until the client gives up or
		// the run ends, and the connection is closed without an answer.
		select {
		case <-r.Context().Done():
		case <-run.ctx.Done():
		}
		c.leave(run, ep.name)
		panic(http.ErrAbortHandler)
	}
	c.record(run, ep.name, ev, at)
	c.leave(run, ep.name)
	w.WriteHeader(http.StatusOK)
}

// arrive counts a verified request as open and says whether it hangs.
func (c *endpointConsumer) arrive(name string) (*endpointRun, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.run
	s.open[name]++
	s.peak[name] = max(s.peak[name], s.open[name])
	if s.hang[name] {
		s.hung[name]++
		return s, true
	}
	return s, false
}

// leave counts a request of run s as answered or abandoned.
func (c *endpointConsumer) leave(s *endpointRun, name string) {
	c.mu.Lock()
	s.open[name]--
	c.mu.Unlock()
}

// record notes that endpoint name received ev at.
func (c *endpointConsumer) record(s *endpointRun, name string, ev event, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Seq < s.floor {
		return
	}
	got := s.got[name]
	if got == nil {
		got = map[int64]time.Time{}
		s.got[name] = got
	}
	if _, ok := got[ev.Seq]; ok {
		s.dups++
		return
	}
	got[ev.Seq] = at
	s.ins[ev.Seq] = time.Unix(0, ev.T)
	if !s.counted[name] {
		return
	}
	if s.n++; s.want > 0 && s.n >= s.want {
		s.want = 0
		close(s.done)
	}
}

// await waits until every counted endpoint (see count) received n distinct
// events in the current run (each event at most once per endpoint, so n
// receipts each), or the deadline passes (errMissing) or ctx ends. A run
// may be awaited more than once (a warm-up, then the measured events), one
// await at a time.
func (c *endpointConsumer) await(ctx context.Context, n int, timeout time.Duration) error {
	c.mu.Lock()
	s := c.run
	want := n * len(s.counted)
	if s.n >= want {
		c.mu.Unlock()
		return nil
	}
	s.want, s.done = want, make(chan struct{})
	done := s.done
	c.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("%w: %d of %d receipts after %s", errMissing, c.received(), want, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// count sets the endpoints whose receipts await counts; call it before the
// run's first event is inserted.
func (c *endpointConsumer) count(names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.run.counted = map[string]bool{}
	for _, name := range names {
		c.run.counted[name] = true
	}
}

// received is how many receipts of the counted endpoints the run has.
func (c *endpointConsumer) received() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run.n
}

// endpointSnapshot is a copy of a run's record.
type endpointSnapshot struct {
	got        map[string]map[int64]time.Time
	ins        map[int64]time.Time
	dups       int
	hung, peak map[string]int
	refused    map[string]int
}

func (c *endpointConsumer) snapshot() endpointSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.run
	out := endpointSnapshot{got: map[string]map[int64]time.Time{}, ins: maps.Clone(s.ins), dups: s.dups,
		hung: maps.Clone(s.hung), peak: maps.Clone(s.peak), refused: maps.Clone(s.refused)}
	for name, got := range s.got {
		out.got[name] = maps.Clone(got)
	}
	return out
}
