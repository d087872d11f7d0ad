package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// maxBody is the largest body Fluxora consumers accept (256 KiB).
const maxBody = 256 << 10

// event is the payload every system delivers: a sequence number unique
// within a run and the insert start time (Unix nanoseconds).
type event struct {
	Seq int64 `json:"seq"`
	T   int64 `json:"t"`
}

// receipt is what the consumer saw of one delivered event.
type receipt struct {
	Inserted time.Time // the payload's insert start
	At       time.Time // when the request that was answered 200 arrived
	Answered time.Time // when it was answered: At plus the service time
}

// consumer is the loopback webhook endpoint every system delivers to. It
// verifies each request's signature like a Fluxora consumer does, answers
// as the run's profile says (200 at once, 503 to first attempts, 200 after
// a service time, or never), and records receipt times by the payload's
// seq.
type consumer struct {
	secret []byte
	srv    *http.Server
	url    string

	badSignatures atomic.Int64 // over the consumer's whole life

	mu  sync.Mutex
	run *runState
}

// runState is one mode's record of deliveries.
type runState struct {
	floor   int64 // events with a lower seq belong to an earlier run: answered 200, not recorded
	profile profile
	// ctx ends when the run does (the next reset, or Close): every request
	// still waiting for its answer then ends without one.
	ctx       context.Context
	cancel    context.CancelFunc
	got       map[int64]receipt
	firstFail map[int64]time.Time // attempt 1 answered 503, by seq
	retryAt   map[int64]time.Time // attempt 2 arrived, by seq
	hung      map[int64]time.Time // first attempt left unanswered (profileHang), by seq
	dups      int                 // 200-answered requests for an already delivered seq
	last      time.Time           // latest first delivery
	want      int                 // close done once len(got) reaches it
	done      chan struct{}
}

// newConsumer listens on 127.0.0.1 (a free port) and serves until Close.
func newConsumer(secret []byte) (*consumer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c := &consumer{secret: secret, url: "http://" + ln.Addr().String() + "/webhook"}
	c.reset(0, profileInstant)
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Minute}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// URL is where systems POST.
func (c *consumer) URL() string { return c.url }

// Close ends the requests still waiting for an answer and stops the server.
func (c *consumer) Close() error {
	c.mu.Lock()
	c.run.cancel()
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.srv.Shutdown(ctx)
}

// reset starts a new run that records events with seq >= floor and answers
// as p says: every earlier receipt is forgotten and every request of the
// previous run still waiting for its answer ends without one.
func (c *consumer) reset(floor int64, p profile) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run != nil {
		c.run.cancel()
	}
	c.run = &runState{floor: floor, profile: p, ctx: ctx, cancel: cancel, got: map[int64]receipt{},
		firstFail: map[int64]time.Time{}, retryAt: map[int64]time.Time{}, hung: map[int64]time.Time{},
		done: make(chan struct{})}
}

func (c *consumer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if !c.verify(r.Header, body, at) {
		c.badSignatures.Add(1)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	attempt, _ := strconv.Atoi(r.Header.Get("X-Fluxora-Attempt"))
	a := c.plan(ev, attempt, at)
	if a.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if !a.run.pause(r.Context(), a.wait) {
		// The client gave up or the run ended: no answer at all, the
		// connection is closed, as with a consumer that hangs.
		panic(http.ErrAbortHandler)
	}
	if a.record {
		c.deliver(a.run, ev, at, time.Now())
	}
	w.WriteHeader(http.StatusOK)
}

// answer is what the consumer does with one verified request.
type answer struct {
	run    *runState     // the run the request arrived in
	fail   bool          // answer 503 at once
	wait   time.Duration // else wait this long (hangForever: never answer), then answer 200
	record bool          // and record the delivery
}

// plan notes a verified request's arrival and decides its answer.
func (c *consumer) plan(ev event, attempt int, at time.Time) answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.run
	if ev.Seq < s.floor {
		return answer{run: s}
	}
	if s.profile == profileFailFirst && attempt <= 1 {
		s.firstFail[ev.Seq] = at
		return answer{run: s, fail: true}
	}
	if attempt == 2 {
		if _, ok := s.retryAt[ev.Seq]; !ok {
			s.retryAt[ev.Seq] = at
		}
	}
	wait := s.profile.service(ev.Seq, attempt)
	if wait == hangForever {
		if _, ok := s.hung[ev.Seq]; ok {
			wait = tailService // an event hangs once, whatever attempt its system says it is on
		} else {
			s.hung[ev.Seq] = at
		}
	}
	return answer{run: s, wait: wait, record: true}
}

// deliver records a request of run s that arrived at and was answered 200
// at answered.
func (c *consumer) deliver(s *runState, ev event, at, answered time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := s.got[ev.Seq]; ok {
		s.dups++
		return
	}
	s.got[ev.Seq] = receipt{Inserted: time.Unix(0, ev.T), At: at, Answered: answered}
	if at.After(s.last) {
		s.last = at
	}
	if s.want > 0 && len(s.got) >= s.want {
		s.want = 0
		close(s.done)
	}
}

// verify checks x-fluxora-signature: hex HMAC-SHA256(secret, ts + "." +
// body), with the timestamp at most 300 s off, as Fluxora consumers do.
func (c *consumer) verify(h http.Header, body []byte, now time.Time) bool {
	tsText := h.Get("X-Fluxora-Timestamp")
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil || h.Get("X-Fluxora-Delivery-Id") == "" || h.Get("X-Fluxora-Event") == "" {
		return false
	}
	if d := now.Unix() - ts; d > 300 || d < -300 {
		return false
	}
	got, err := hex.DecodeString(h.Get("X-Fluxora-Signature"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, c.secret)
	mac.Write([]byte(tsText))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// errMissing reports that not every expected event arrived in time.
var errMissing = errors.New("not every event was delivered in time")

// await waits until n distinct events of the current run were delivered, or
// the deadline passes (errMissing) or ctx ends.
func (c *consumer) await(ctx context.Context, n int, timeout time.Duration) error {
	c.mu.Lock()
	s := c.run
	if len(s.got) >= n {
		c.mu.Unlock()
		return nil
	}
	s.want = n
	c.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.done:
		return nil
	case <-t.C:
		return fmt.Errorf("%w: %d of %d after %s", errMissing, c.delivered(), n, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// delivered is how many distinct events the current run received.
func (c *consumer) delivered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.run.got)
}

// snapshot returns a copy of the current run's record.
func (c *consumer) snapshot() runState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := *c.run
	s.got = maps.Clone(s.got)
	s.firstFail = maps.Clone(s.firstFail)
	s.retryAt = maps.Clone(s.retryAt)
	s.hung = maps.Clone(s.hung)
	return s
}

// latencies returns insert-start-to-receipt durations of the run's events.
func (s runState) latencies() []time.Duration {
	out := make([]time.Duration, 0, len(s.got))
	for _, r := range s.got {
		out = append(out, r.At.Sub(r.Inserted))
	}
	return out
}
