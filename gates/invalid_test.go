package gates_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/webhook"
)

// keyOf is the gate's key kind ("webhook_cb", "webhook_cb_probe",
// "webhook_rl") of consumerURL under prefix p.
func keyOf(p, kind string) string {
	sum := sha256.Sum256([]byte(consumerURL))
	return p + kind + ":" + hex.EncodeToString(sum[:])
}

// Garbage under a gate's Redis key is treated as absent: the attempt is
// allowed, the metric counts it once, the key is cleaned so that the next
// check (of any worker) sees no garbage, and no Redis error is reported.
func TestInvalidStateFailsOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const reset = 20 * time.Second
	nowMS := time.Now().UnixMilli()
	str := func(v string) func(*redis.Client, string) error {
		return func(c *redis.Client, k string) error { return c.Set(ctx, k, v, time.Hour).Err() }
	}
	cases := []struct {
		name     string
		gate     string // the metric label; "" for the valid control
		kind     string // the key written
		write    func(*redis.Client, string) error
		halfOpen bool // also store a valid half-open breaker state
		attempt  int
	}{
		{"resetAt 1e300", "breaker", "webhook_cb", str(`{"state":"open","failures":3,"resetAt":1e300}`), false, 1},
		{"resetAt 1e18 (wraps a duration)", "breaker", "webhook_cb", str(`{"state":"open","failures":3,"resetAt":1e18}`), false, 1},
		{"resetAt beyond now + reset", "breaker", "webhook_cb", str(fmt.Sprintf(`{"state":"open","failures":3,"resetAt":%d}`, nowMS+int64(time.Hour/time.Millisecond))), false, 1},
		{"resetAt negative", "breaker", "webhook_cb", str(`{"state":"open","failures":3,"resetAt":-5}`), false, 1},
		{"resetAt NaN as a string", "breaker", "webhook_cb", str(`{"state":"open","failures":3,"resetAt":"NaN"}`), false, 1},
		{"resetAt infinite", "breaker", "webhook_cb", str(`{"state":"open","failures":3,"resetAt":1e400}`), false, 1},
		{"resetAt missing", "breaker", "webhook_cb", str(`{"state":"open","failures":3}`), false, 1},
		{"failures negative", "breaker", "webhook_cb", str(`{"state":"closed","failures":-7,"resetAt":0}`), false, 1},
		{"failures huge", "breaker", "webhook_cb", str(`{"state":"closed","failures":1e15,"resetAt":0}`), false, 1},
		{"failures fractional", "breaker", "webhook_cb", str(`{"state":"closed","failures":2.5,"resetAt":0}`), false, 1},
		{"failures a string", "breaker", "webhook_cb", str(`{"state":"closed","failures":"3","resetAt":0}`), false, 1},
		{"state not a known word", "breaker", "webhook_cb", str(`{"state":"ajar","failures":3,"resetAt":0}`), false, 1},
		{"state a number", "breaker", "webhook_cb", str(`{"state":2,"failures":3,"resetAt":0}`), false, 1},
		{"not JSON", "breaker", "webhook_cb", str(`{{open`), false, 1},
		{"empty string", "breaker", "webhook_cb", str(``), false, 1},
		{"JSON array", "breaker", "webhook_cb", str(`[1,2,3]`), false, 1},
		{"JSON null", "breaker", "webhook_cb", str(`null`), false, 1},
		{"JSON number", "breaker", "webhook_cb", str(`42`), false, 1},
		{"a hash", "breaker", "webhook_cb", func(c *redis.Client, k string) error {
			return c.HSet(ctx, k, "state", "open", "resetAt", "1e300").Err()
		}, false, 1},
		{"a list", "breaker", "webhook_cb", func(c *redis.Client, k string) error { return c.RPush(ctx, k, "open").Err() }, false, 1},
		{"probe owner without expiry", "probe", "webhook_cb_probe", func(c *redis.Client, k string) error {
			return c.Set(ctx, k, "someone", 0).Err()
		}, true, 1},
		{"probe owner beyond the probe TTL", "probe", "webhook_cb_probe", func(c *redis.Client, k string) error {
			return c.Set(ctx, k, "someone", 100*time.Hour).Err()
		}, true, 1},
		{"probe owner a hash without expiry", "probe", "webhook_cb_probe", func(c *redis.Client, k string) error {
			return c.HSet(ctx, k, "a", "b").Err()
		}, true, 1},
		{"rate-limit window a string", "rate_limit", "webhook_rl", str(`full`), false, 2},
		{"rate-limit window full of future entries", "rate_limit", "webhook_rl", func(c *redis.Client, k string) error {
			for i := range 20 {
				if err := c.ZAdd(ctx, k, redis.Z{Score: 1e300, Member: i}).Err(); err != nil {
					return err
				}
			}
			return nil
		}, false, 2},
		// Its reset time is taken when it is written: on a busy machine
		// the table's nowMS may be seconds old by then. It lies far enough
		// ahead that a slow check still finds the circuit open.
		{"valid open state (control)", "", "webhook_cb", func(c *redis.Client, k string) error {
			return c.Set(ctx, k, fmt.Sprintf(`{"state":"open","failures":3,"resetAt":%d}`, time.Now().UnixMilli()+10000), time.Hour).Err()
		}, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			gs, client, regs := workersAt(t, p, 2, gates.Config{BreakerThreshold: 3, BreakerReset: reset, RetryRPS: 5, ProbeTTL: time.Minute})
			if tc.halfOpen {
				if err := client.Set(ctx, keyOf(p, "webhook_cb"), `{"state":"half-open","failures":3,"resetAt":0}`, time.Hour).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.write(client, keyOf(p, tc.kind)); err != nil {
				t.Fatal(err)
			}
			if tc.kind == "webhook_cb" { // the operator's view (another worker, its own metrics)
				s, err := gs[1].State(ctx, consumerURL)
				if err != nil || s.Invalid != (tc.gate != "") || (tc.gate != "" && s.State != "closed") {
					t.Errorf("State = %+v, %v", s, err)
				}
			}
			start := time.Now()
			d := gs[0].Check(ctx, consumerURL, tc.attempt)
			if el := time.Since(start); el > 4*time.Second {
				t.Fatalf("check took %v", el)
			}
			if got := counter(t, regs[0], "fluxora_webhook_gate_redis_errors_total", "check"); got != 0 {
				t.Fatalf("%v redis errors: the check itself failed", got)
			}
			if tc.gate == "" {
				if d.Allow || d.Reason != gates.ReasonCircuitOpen || d.DeferFor <= 0 || d.DeferFor > 10*time.Second {
					t.Fatalf("valid open state: %+v", d)
				}
				for _, g := range []string{"breaker", "probe", "rate_limit"} {
					if n := counter(t, regs[0], "fluxora_webhook_gate_state_invalid_total", g); n != 0 {
						t.Fatalf("valid state counted invalid (%s): %v", g, n)
					}
				}
				return
			}
			if !d.Allow {
				t.Fatalf("invalid state refused the attempt: %+v", d)
			}
			if n := counter(t, regs[0], "fluxora_webhook_gate_state_invalid_total", tc.gate); n != 1 {
				t.Fatalf("invalid_total{gate=%q} = %v, want 1", tc.gate, n)
			}
			// Cleaned once for everyone: the next check finds nothing invalid.
			gs[0].Check(ctx, consumerURL, tc.attempt)
			if n := counter(t, regs[0], "fluxora_webhook_gate_state_invalid_total", tc.gate); n != 1 {
				t.Fatalf("invalid_total{gate=%q} = %v after a second check, want still 1", tc.gate, n)
			}
		})
	}
}

// Record on garbage starts from a closed circuit with no failures.
func TestInvalidStateRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, v := range []string{`{"state":"open","failures":3,"resetAt":1e300}`, `{"state":"closed","failures":-3,"resetAt":0}`, `nope`} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			gs, client, regs := workersAt(t, p, 1, gates.Config{BreakerThreshold: 3, BreakerReset: time.Second})
			if err := client.Set(ctx, keyOf(p, "webhook_cb"), v, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			gs[0].Record(ctx, consumerURL, webhook.Retryable, false)
			s, err := gs[0].State(ctx, consumerURL)
			if err != nil || s.Invalid || s.State != "closed" || s.Failures != 1 {
				t.Fatalf("after one failure on garbage: %+v %v", s, err)
			}
			if n := counter(t, regs[0], "fluxora_webhook_gate_state_invalid_total", "breaker"); n != 1 {
				t.Fatalf("invalid_total = %v, want 1", n)
			}
			if n := counter(t, regs[0], "fluxora_webhook_gate_redis_errors_total", "record"); n != 0 {
				t.Fatalf("record errors = %v", n)
			}
		})
	}
}

// The warning names the gate and the key (a SHA-256), never the URL, and
// repeats at most once per gate per 10 s however often garbage returns.
func TestInvalidStateWarnsWithoutURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := prefix(t)
	client := newClient(t, p)
	var logs syncBuf
	g, err := gates.New(gates.Config{Client: client, KeyPrefix: p, BreakerThreshold: 3, CallTimeout: 5 * time.Second,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := client.Set(ctx, keyOf(p, "webhook_cb"), `{"state":"open","failures":3,"resetAt":1e300}`, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if d := g.Check(ctx, consumerURL, 1); !d.Allow {
			t.Fatalf("refused: %+v", d)
		}
	}
	out := logs.String()
	if n := strings.Count(out, `"level":"WARN"`); n != 1 || !strings.Contains(out, `"gate":"breaker"`) || !strings.Contains(out, keyOf(p, "webhook_cb")) {
		t.Fatalf("want one warning naming the gate and key, got:\n%s", out)
	}
	if strings.Contains(out, "consumer.example.com") || strings.Contains(out, "token=abc") {
		t.Fatalf("the URL reached the log:\n%s", out)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
