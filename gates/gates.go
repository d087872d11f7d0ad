// Package gates protects a consumer with two gates whose state lives in
// Redis, shared by every worker process: a sliding-window rate limit on
// retry attempts and a circuit breaker.
//
// Every decision is one Lua script run on Redis's clock, so check-and-record
// is atomic across workers. Keys carry the lowercase hex SHA-256 of the
// consumer URL, never the URL. Redis trouble never stops deliveries: each
// call is bounded by CallTimeout and any error allows the attempt
// (fail-open); gating resumes on the next call that succeeds. Nor is what
// Redis holds trusted: a state of the wrong type or out of range is treated
// as absent, deleted, counted and logged, and the attempt allowed (see
// valid.go).
package gates

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fluxora/webhook-worker/webhook"
)

const (
	// RetryRPSDefault is the default Config.RetryRPS.
	RetryRPSDefault = 10
	// BreakerResetDefault is the default Config.BreakerReset.
	BreakerResetDefault = 5 * time.Minute
	// CallTimeoutDefault is the default Config.CallTimeout.
	CallTimeoutDefault = 100 * time.Millisecond
	// ProbeTTLDefault is the default Config.ProbeTTL.
	ProbeTTLDefault = 30 * time.Second
	// Window is the rate limit's sliding window.
	Window = time.Second
	// ProbeBusyDefer is how long an attempt waits while another worker's
	// half-open probe is in flight.
	ProbeBusyDefer = time.Second
)

//go:embed state.lua
var stateSrc string

//go:embed check.lua
var checkSrc string

//go:embed record.lua
var recordSrc string

var (
	checkScript  = redis.NewScript(stateSrc + checkSrc)
	recordScript = redis.NewScript(stateSrc + recordSrc)
)

// Client is the part of a go-redis client the gates use; *redis.Client and
// redis.UniversalClient satisfy it.
type Client interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Config configures Gates.
type Config struct {
	// Client reaches Redis. Nil disables both gates: Check allows every
	// attempt without a Redis call. Metrics are registered either way.
	Client Client
	// KeyPrefix is prepended to every key. Defaults to "".
	KeyPrefix string
	// RetryRPS is the most retry attempts (attempt >= 2) per second per
	// consumer URL. Defaults to RetryRPSDefault (10).
	RetryRPS int
	// BreakerThreshold is how many consecutive retryable failures open the
	// circuit. 0 (the default) disables the breaker.
	BreakerThreshold int
	// BreakerReset is how long the circuit stays open. Defaults to
	// BreakerResetDefault (5m). A stored state whose reset lies further
	// ahead is invalid (treated as absent): workers sharing a Redis should
	// share this value, or the shortest one wins.
	BreakerReset time.Duration
	// ProbeTTL is the expiry of the half-open probe ownership; it must
	// exceed the request timeout. Defaults to ProbeTTLDefault (30s).
	ProbeTTL time.Duration
	// CallTimeout bounds each Redis call. Defaults to CallTimeoutDefault
	// (100ms).
	CallTimeout time.Duration
	// Registerer receives the metrics. Required.
	Registerer prometheus.Registerer
	// Logger receives Redis errors at debug level and invalid state at warn
	// (at most once per gate per 10s). Defaults to discarding.
	Logger *slog.Logger
}

// Gates decides, per attempt, whether to send.
type Gates struct {
	cfg     Config
	metrics *metrics
	warned  invalidLog
}

// New returns Gates or an error naming the bad field.
func New(cfg Config) (*Gates, error) {
	if cfg.Registerer == nil {
		return nil, errors.New("gates: Registerer is required")
	}
	if cfg.RetryRPS < 0 || cfg.BreakerThreshold < 0 || cfg.BreakerReset < 0 || cfg.ProbeTTL < 0 || cfg.CallTimeout < 0 {
		return nil, errors.New("gates: RetryRPS, BreakerThreshold, BreakerReset, ProbeTTL and CallTimeout must not be negative")
	}
	cfg.RetryRPS = cmp.Or(cfg.RetryRPS, RetryRPSDefault)
	cfg.BreakerReset = cmp.Or(cfg.BreakerReset, BreakerResetDefault)
	cfg.ProbeTTL = cmp.Or(cfg.ProbeTTL, ProbeTTLDefault)
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, CallTimeoutDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return &Gates{cfg: cfg, metrics: newMetrics(cfg.Registerer), warned: invalidLog{last: map[string]time.Time{}}}, nil
}

// MaxDefer is the longest deferral a Decision asks for: the breaker's
// reset, the rate-limit window or the probe-busy deferral.
func (g *Gates) MaxDefer() time.Duration { return max(g.cfg.BreakerReset, Window, ProbeBusyDefer) }

// Enabled reports whether a Redis client is configured.
func (g *Gates) Enabled() bool { return g.cfg.Client != nil }

// Reason says why an attempt was not allowed.
type Reason int

// The reasons of a refusal.
const (
	ReasonNone Reason = iota
	ReasonRateLimited
	ReasonCircuitOpen
	ReasonProbeBusy
)

// String is the metric label of r.
func (r Reason) String() string {
	switch r {
	case ReasonRateLimited:
		return "rate_limited"
	case ReasonCircuitOpen:
		return "circuit_open"
	case ReasonProbeBusy:
		return "probe_busy"
	default:
		return "none"
	}
}

// Decision is the verdict on one attempt.
type Decision struct {
	Allow    bool
	Reason   Reason        // why not allowed
	DeferFor time.Duration // when not allowed: how long to defer the row, in [1ms, MaxDefer]
	Probe    bool          // this attempt is the half-open probe
}

// keys returns the breaker, probe and rate-limit keys of consumerURL.
func (g *Gates) keys(consumerURL string) []string {
	sum := sha256.Sum256([]byte(consumerURL))
	h := hex.EncodeToString(sum[:])
	p := g.cfg.KeyPrefix
	return []string{p + "webhook_cb:" + h, p + "webhook_cb_probe:" + h, p + "webhook_rl:" + h}
}

func (g *Gates) stateTTL() int64 { return (2*g.cfg.BreakerReset + time.Hour).Milliseconds() }

// Check decides one attempt for consumerURL; attempt is 1 for a first
// attempt (never rate limited). On any Redis error, or a reply out of
// range, it allows the attempt.
func (g *Gates) Check(ctx context.Context, consumerURL string, attempt int) Decision {
	return g.CheckLimit(ctx, consumerURL, attempt, 0)
}

// CheckLimit is Check with the endpoint's own retry limit per second;
// retryRPS <= 0 means Config.RetryRPS.
func (g *Gates) CheckLimit(ctx context.Context, consumerURL string, attempt, retryRPS int) Decision {
	if retryRPS <= 0 {
		retryRPS = g.cfg.RetryRPS
	}
	allow := Decision{Allow: true}
	if g.cfg.Client == nil || (g.cfg.BreakerThreshold == 0 && attempt < 2) {
		return allow
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	keys := g.keys(consumerURL)
	res, err := checkScript.Run(ctx, g.cfg.Client, keys,
		g.cfg.BreakerThreshold, attempt, retryRPS, g.cfg.ProbeTTL.Milliseconds(), token(),
		g.stateTTL(), ProbeBusyDefer.Milliseconds(), g.cfg.BreakerReset.Milliseconds()).Slice()
	var c checkReply
	if err == nil {
		c, err = parseCheck(res)
	}
	if err != nil {
		g.redisError("check", err)
		return allow
	}
	for i, b := range invalidBits {
		if c.invalid&b.bit != 0 {
			g.invalidState(b.gate, keys[i], "stored value of the wrong type or out of range; treated as absent")
		}
	}
	g.transition(c.from, c.to)
	if c.allow {
		return Decision{Allow: true, Probe: c.probe}
	}
	bound := g.deferBound(c.reason)
	if c.deferMS < 0 || c.deferMS > bound.Milliseconds() {
		gate, k := reasonGate(c.reason)
		g.invalidState(gate, keys[k], fmt.Sprintf("deferral of %dms out of [0, %dms]", c.deferMS, bound.Milliseconds()))
		return allow
	}
	g.metrics.deferrals.WithLabelValues(c.reason.String()).Inc()
	return Decision{Reason: c.reason, DeferFor: max(time.Duration(c.deferMS)*time.Millisecond, time.Millisecond)}
}

// Record updates the breaker with the outcome of an allowed attempt; probe
// is that attempt's Decision.Probe. Best effort: errors are counted and
// logged at debug.
func (g *Gates) Record(ctx context.Context, consumerURL string, o webhook.Class, probe bool) {
	if g.cfg.Client == nil || g.cfg.BreakerThreshold == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	p := 0
	if probe {
		p = 1
	}
	keys := g.keys(consumerURL)[:2]
	res, err := recordScript.Run(ctx, g.cfg.Client, keys,
		string(o), p, g.cfg.BreakerThreshold, g.cfg.BreakerReset.Milliseconds(), g.stateTTL()).Slice()
	var from, to string
	var invalid bool
	if err == nil {
		from, to, invalid, err = parseRecord(res)
	}
	if err != nil {
		g.redisError("record", err)
		return
	}
	if invalid {
		g.invalidState(gateBreaker, keys[0], "stored value of the wrong type or out of range; treated as absent")
	}
	g.transition(from, to)
}

// transition counts a change of state; from and to are known states or "".
func (g *Gates) transition(from, to string) {
	if from != "" && to != "" && from != to {
		g.metrics.transitions.WithLabelValues(from, to).Inc()
	}
}

func (g *Gates) redisError(op string, err error) {
	g.metrics.redisErrors.WithLabelValues(op).Inc()
	g.cfg.Logger.Debug("gates: redis call failed; allowing (fail-open)", "op", op, "error", err)
}

func token() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
