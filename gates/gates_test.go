package gates_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/webhook"
)

var _ gates.Client = (*redis.Client)(nil)

const consumerURL = "https://consumer.example.com/hooks?token=abc"

func redisOptions(t *testing.T) *redis.Options {
	t.Helper()
	u := os.Getenv("TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("TEST_REDIS_URL: %v", err)
	}
	return opt
}

// newClient connects to the test Redis (failing, never skipping, without
// one) and deletes the test's keys at the end.
func newClient(t *testing.T, prefix string) *redis.Client {
	t.Helper()
	c := redis.NewClient(redisOptions(t))
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis is required (TEST_REDIS_URL): %v", err)
	}
	t.Cleanup(func() {
		keys, _ := c.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
		c.Close()
	})
	return c
}

func prefix(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "test:gates:" + hex.EncodeToString(b) + ":"
}

// workers returns n Gates ("worker processes") sharing one Redis and prefix.
func workers(t *testing.T, n int, cfg gates.Config) ([]*gates.Gates, *redis.Client, []*prometheus.Registry) {
	t.Helper()
	return workersAt(t, prefix(t), n, cfg)
}

// workersAt is workers with the key prefix p.
func workersAt(t *testing.T, p string, n int, cfg gates.Config) ([]*gates.Gates, *redis.Client, []*prometheus.Registry) {
	t.Helper()
	client := newClient(t, p)
	var gs []*gates.Gates
	var regs []*prometheus.Registry
	for range n {
		c := cfg
		c.Client, c.KeyPrefix = client, p
		c.CallTimeout = 5 * time.Second // a loaded CI machine must not fail open here
		reg := prometheus.NewRegistry()
		c.Registerer = reg
		g, err := gates.New(c)
		if err != nil {
			t.Fatal(err)
		}
		gs, regs = append(gs, g), append(regs, reg)
	}
	return gs, client, regs
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i, lp := range m.GetLabel() {
				if i >= len(labels) || lp.GetValue() != labels[i] {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestDisabledWithoutClient(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	g, err := gates.New(gates.Config{Registerer: reg, BreakerThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d := g.Check(context.Background(), consumerURL, 5); !d.Allow || g.Enabled() {
		t.Fatalf("disabled gates refused: %+v", d)
	}
	if n, err := testutil.GatherAndCount(reg, "fluxora_webhook_circuit_breaker_transitions_total"); err != nil || n == 0 {
		t.Fatalf("transitions metric not registered: %d %v", n, err)
	}
	if _, err := gates.New(gates.Config{}); err == nil || !strings.Contains(err.Error(), "Registerer") {
		t.Fatalf("missing Registerer: %v", err)
	}
}

func TestRateLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	gs, client, regs := workers(t, 2, gates.Config{RetryRPS: 5})
	ctx := context.Background()
	for range 50 { // first attempts are never limited
		if d := gs[0].Check(ctx, consumerURL, 1); !d.Allow {
			t.Fatalf("first attempt limited: %+v", d)
		}
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 40 {
		wg.Go(func() {
			d := gs[i%2].Check(ctx, consumerURL, 2)
			if d.Allow {
				allowed.Add(1)
			} else if d.Reason != gates.ReasonRateLimited || d.DeferFor <= 0 || d.DeferFor > gates.Window {
				t.Errorf("bad deferral %+v", d)
			}
		})
	}
	wg.Wait()
	if time.Since(start) < 900*time.Millisecond && allowed.Load() != 5 {
		t.Fatalf("allowed %d retries within one window, want 5", allowed.Load())
	}
	if got := counter(t, regs[0], "fluxora_webhook_gate_deferrals_total", "rate_limited") +
		counter(t, regs[1], "fluxora_webhook_gate_deferrals_total", "rate_limited"); got != float64(40-allowed.Load()) {
		t.Fatalf("deferral metric %v, want %d", got, 40-allowed.Load())
	}
	keys, _ := client.Keys(ctx, "*webhook_rl:*").Result()
	var found bool
	for _, k := range keys {
		if ttl := client.PTTL(ctx, k).Val(); strings.Contains(k, "test:gates:") && ttl > 0 {
			found = true
		}
	}
	if !found {
		t.Fatal("rate-limit key without expiry")
	}
}

func TestBreaker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The reset outlasts a loaded machine's pause between opening the
	// circuit and checking it, so that the checks see it open.
	const reset = 2 * time.Second
	gs, client, regs := workers(t, 2, gates.Config{BreakerThreshold: 6, BreakerReset: reset})

	var wg sync.WaitGroup
	for i := range 5 { // concurrent failures from two workers: none lost
		wg.Go(func() { gs[i%2].Record(ctx, consumerURL, webhook.Retryable, false) })
	}
	wg.Wait()
	gs[0].Record(ctx, consumerURL, webhook.Permanent, false) // does not count
	if s, err := gs[0].State(ctx, consumerURL); err != nil || s.State != "closed" || s.Failures != 5 {
		t.Fatalf("after 5 failures: %+v %v", s, err)
	}
	gs[1].Record(ctx, consumerURL, webhook.Retryable, false)
	s, err := gs[0].State(ctx, consumerURL)
	if err != nil || s.State != "open" {
		t.Fatalf("after the 6th failure: %+v %v", s, err)
	}
	if counter(t, regs[1], "fluxora_webhook_circuit_breaker_transitions_total", "closed", "open") != 1 {
		t.Fatal("closed->open transition not counted by the worker that made it")
	}
	for _, attempt := range []int{1, 3} {
		d := gs[0].Check(ctx, consumerURL, attempt)
		if d.Allow || d.Reason != gates.ReasonCircuitOpen || d.DeferFor <= 0 || d.DeferFor > reset {
			t.Fatalf("open circuit, attempt %d: %+v", attempt, d)
		}
	}

	// After the reset, many concurrent checks from two workers: one probe.
	for time.Now().Before(s.ResetAt.Add(5 * time.Millisecond)) {
		time.Sleep(5 * time.Millisecond) // until the reset time the test read from Redis
	}
	var probes atomic.Int64
	for i := range 20 {
		wg.Go(func() {
			d := gs[i%2].Check(ctx, consumerURL, 1)
			if d.Probe {
				probes.Add(1)
			} else if d.Allow || d.Reason != gates.ReasonProbeBusy {
				t.Errorf("non-probe decision in half-open: %+v", d)
			}
		})
	}
	wg.Wait()
	if probes.Load() != 1 {
		t.Fatalf("%d probes, want exactly 1", probes.Load())
	}
	// Probe failure re-opens; the next probe's success closes.
	gs[0].Record(ctx, consumerURL, webhook.Retryable, true)
	if s, _ := gs[1].State(ctx, consumerURL); s.State != "open" {
		t.Fatalf("after a failed probe: %+v", s)
	}
	s, _ = gs[1].State(ctx, consumerURL)
	for time.Now().Before(s.ResetAt.Add(5 * time.Millisecond)) {
		time.Sleep(5 * time.Millisecond)
	}
	d := gs[1].Check(ctx, consumerURL, 1)
	if !d.Allow || !d.Probe {
		t.Fatalf("second probe: %+v", d)
	}
	gs[1].Record(ctx, consumerURL, webhook.Delivered, true)
	if s, _ := gs[0].State(ctx, consumerURL); s.State != "closed" || s.Failures != 0 {
		t.Fatalf("after a successful probe: %+v", s)
	}
	if d := gs[0].Check(ctx, consumerURL, 1); !d.Allow || d.Probe {
		t.Fatalf("closed again: %+v", d)
	}

	keys, _ := client.Keys(ctx, "test:gates:*").Result()
	for _, k := range keys {
		if strings.Contains(k, "consumer.example.com") || strings.Contains(k, "http") {
			t.Fatalf("key holds the raw URL: %s", k)
		}
		seg := k[strings.LastIndex(k, ":")+1:]
		if _, err := hex.DecodeString(seg); err != nil || len(seg) != 64 {
			t.Fatalf("key segment is not a SHA-256: %s", k)
		}
	}
}

// proxy is a TCP proxy to Redis that the test can cut and restore, to stop
// and bring back "Redis" without touching the shared server.
type proxy struct {
	mu     sync.Mutex
	up     bool
	conns  []net.Conn
	ln     net.Listener
	target string
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{up: true, ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if !p.up {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
}

func TestFailOpenAndResume(t *testing.T) {
	t.Parallel()
	opt := redisOptions(t)
	px := newProxy(t, opt.Addr)
	pre := prefix(t)
	newClient(t, pre) // cleanup of the prefix through a direct client
	o := *opt
	o.Addr = px.ln.Addr().String()
	o.MaxRetries = -1
	client := redis.NewClient(&o)
	t.Cleanup(func() { client.Close() })
	reg := prometheus.NewRegistry()
	g, err := gates.New(gates.Config{Client: client, KeyPrefix: pre, RetryRPS: 1, BreakerThreshold: 100,
		CallTimeout: 100 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// refused reports whether Redis refuses a retry within the deadline: a
	// check slower than the 100 ms call timeout on a loaded machine fails
	// open, and is not what this test is about.
	refused := func() bool {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if d := g.Check(ctx, consumerURL, 2); !d.Allow && d.Reason == gates.ReasonRateLimited {
				return true
			}
		}
		return false
	}
	if !refused() {
		t.Fatal("rate limit not enforced while Redis is up")
	}
	px.cut()
	start := time.Now()
	for range 5 {
		if d := g.Check(ctx, consumerURL, 2); !d.Allow {
			t.Fatalf("Redis down: refused %+v", d)
		}
	}
	if el := time.Since(start); el > 5*500*time.Millisecond {
		t.Fatalf("5 fail-open checks took %v", el)
	}
	if counter(t, reg, "fluxora_webhook_gate_redis_errors_total", "check") < 5 {
		t.Fatal("redis errors not counted")
	}
	px.restore()
	if !refused() { // gating resumes: within a window, a second retry is refused again
		t.Fatal("gating did not resume after Redis came back")
	}
}

// CheckLimit applies an endpoint's own retry limit, keyed by its URL:
// another endpoint keeps the configured one.
func TestCheckLimitPerEndpoint(t *testing.T) {
	t.Parallel()
	gs, _, _ := workers(t, 1, gates.Config{RetryRPS: 3})
	ctx := context.Background()
	count := func(url string, rps int) int {
		n := 0
		for range 20 {
			if gs[0].CheckLimit(ctx, url, 2, rps).Allow {
				n++
			}
		}
		return n
	}
	// Judged only on a round that fits in one window; a loaded machine gets
	// further rounds, on fresh URLs.
	for round := range 10 {
		own, other := fmt.Sprintf("https://own.example.com/%d", round), fmt.Sprintf("https://other.example.com/%d", round)
		start := time.Now()
		gotOwn, gotOther := count(own, 7), count(other, 0)
		if time.Since(start) >= 900*time.Millisecond {
			continue
		}
		if gotOwn != 7 || gotOther != 3 {
			t.Fatalf("allowed %d with the endpoint's limit 7 and %d with the default 3", gotOwn, gotOther)
		}
		return
	}
	t.Fatal("no round of 40 checks fitted in one rate-limit window")
}
