package gates

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"
)

// Nothing read from Redis is trusted: another client, an operator or an
// older release may have written anything under a gate's key. The scripts
// validate the state they read (state.lua) and delete what is invalid, so
// that every worker treats it alike; the Go side checks the type and range
// of every value of a reply, and of a state read with GET. Whatever fails
// is treated as absent: the attempt is allowed (fail-open), counted in
// fluxora_webhook_gate_state_invalid_total{gate} and logged at warn, at
// most once per gate per invalidLogEvery.

// The gate labels of the invalid-state metric, one per key.
const (
	gateBreaker   = "breaker"
	gateProbe     = "probe"
	gateRateLimit = "rate_limit"
)

// invalidBits are the invalid flags of check.lua's reply, by gate.
var invalidBits = [...]struct {
	bit  int64
	gate string
}{{1, gateBreaker}, {2, gateProbe}, {4, gateRateLimit}}

// maxFailures is the largest failure count a valid breaker state holds
// (state.lua's bound).
const maxFailures = 1e9

// invalidLogEvery is the least time between two warnings of one gate.
const invalidLogEvery = 10 * time.Second

// stateSkew is how far State tolerates the reader's clock behind Redis's:
// State judges resetAt by the local clock, the scripts by Redis's.
const stateSkew = time.Minute

// reply is a script's reply, read with a type check on every element.
type reply []any

func (r reply) int(i int, lo, hi int64) (int64, error) {
	v, ok := r[i].(int64)
	if !ok {
		return 0, fmt.Errorf("reply value %d is a %T, not an integer", i, r[i])
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("reply value %d is %d, out of [%d, %d]", i, v, lo, hi)
	}
	return v, nil
}

// state reads a breaker state name; "" (no transition) only when empty is
// true.
func (r reply) state(i int, empty bool) (string, error) {
	s, ok := r[i].(string)
	if !ok {
		return "", fmt.Errorf("reply value %d is a %T, not a string", i, r[i])
	}
	if !knownState(s) && (s != "" || !empty) {
		return "", fmt.Errorf("reply value %d is not a breaker state", i)
	}
	return s, nil
}

func knownState(s string) bool { return s == "closed" || s == "open" || s == "half-open" }

// checkReply is check.lua's reply, read and type-checked.
type checkReply struct {
	allow, probe     bool
	reason           Reason
	deferMS, invalid int64
	from, to         string
}

func parseCheck(res []any) (c checkReply, err error) {
	r := reply(res)
	if len(r) != 7 {
		return c, fmt.Errorf("unexpected reply of %d values", len(r))
	}
	var allow, reason, probe int64
	if allow, err = r.int(0, 0, 1); err != nil {
		return c, err
	}
	if reason, err = r.int(1, 0, int64(ReasonProbeBusy)); err != nil {
		return c, err
	}
	if c.deferMS, err = r.int(2, math.MinInt64, math.MaxInt64); err != nil {
		return c, err
	}
	if probe, err = r.int(3, 0, 1); err != nil {
		return c, err
	}
	if c.from, err = r.state(4, true); err != nil {
		return c, err
	}
	if c.to, err = r.state(5, true); err != nil {
		return c, err
	}
	if c.invalid, err = r.int(6, 0, 7); err != nil {
		return c, err
	}
	c.allow, c.reason, c.probe = allow == 1, Reason(reason), probe == 1
	if c.allow == (c.reason != ReasonNone) {
		return c, fmt.Errorf("reply allows %v with reason %d", c.allow, reason)
	}
	return c, nil
}

// deferBound is the longest deferral a refusal for reason may ask for.
func (g *Gates) deferBound(reason Reason) time.Duration {
	switch reason {
	case ReasonRateLimited:
		return Window
	case ReasonCircuitOpen:
		return g.cfg.BreakerReset
	default:
		return ProbeBusyDefer
	}
}

// reasonGate is the invalid-state gate label of a refusal's reason, and
// the index of its key in Gates.keys.
func reasonGate(r Reason) (gate string, key int) {
	switch r {
	case ReasonRateLimited:
		return gateRateLimit, 2
	case ReasonCircuitOpen:
		return gateBreaker, 0
	default:
		return gateProbe, 1
	}
}

// parseRecord reads record.lua's reply.
func parseRecord(res []any) (from, to string, invalid bool, err error) {
	r := reply(res)
	if len(r) != 3 {
		return "", "", false, fmt.Errorf("unexpected reply of %d values", len(r))
	}
	if from, err = r.state(0, false); err != nil {
		return "", "", false, err
	}
	if to, err = r.state(1, false); err != nil {
		return "", "", false, err
	}
	bad, err := r.int(2, 0, 1)
	return from, to, bad == 1, err
}

// parseState reads a breaker state as stored ({"state","failures",
// "resetAt"}, resetAt in Unix ms); ok is false for anything a worker would
// not have written, resetAt later than latest included.
func parseState(raw []byte, latest time.Time) (s BreakerState, ok bool) {
	var v struct {
		State    *string  `json:"state"`
		Failures *float64 `json:"failures"`
		ResetAt  *float64 `json:"resetAt"`
	}
	if json.Unmarshal(raw, &v) != nil || v.State == nil || v.Failures == nil || v.ResetAt == nil {
		return s, false
	}
	f, r := *v.Failures, *v.ResetAt
	if !knownState(*v.State) || f < 0 || f > maxFailures || f != math.Trunc(f) ||
		r < 0 || r > float64(latest.UnixMilli()) {
		return s, false // JSON has no NaN nor infinity: Unmarshal refused those
	}
	s = BreakerState{State: *v.State, Failures: int(f)}
	if r > 0 {
		s.ResetAt = time.UnixMilli(int64(r))
	}
	return s, true
}

// invalidLog rate-limits the invalid-state warnings, per gate.
type invalidLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// invalidState counts and logs (rate-limited) invalid state found under
// key for gate. The key holds a SHA-256 of the URL, never the URL.
func (g *Gates) invalidState(gate, key, why string) {
	g.metrics.invalid.WithLabelValues(gate).Inc()
	now := time.Now()
	g.warned.mu.Lock()
	if now.Sub(g.warned.last[gate]) < invalidLogEvery {
		g.warned.mu.Unlock()
		return
	}
	g.warned.last[gate] = now
	g.warned.mu.Unlock()
	g.cfg.Logger.Warn("gates: invalid gate state in Redis treated as absent; allowing (fail-open)",
		"gate", gate, "key", key, "reason", why)
}
