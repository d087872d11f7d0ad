package gates

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	transitions *prometheus.CounterVec
	deferrals   *prometheus.CounterVec
	redisErrors *prometheus.CounterVec
	invalid     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		transitions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_circuit_breaker_transitions_total",
			Help: "Circuit breaker state changes made by this worker.",
		}, []string{"from_state", "to_state"}),
		deferrals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_gate_deferrals_total",
			Help: "Attempts deferred by a gate, by reason: rate_limited, circuit_open, probe_busy.",
		}, []string{"reason"}),
		redisErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_gate_redis_errors_total",
			Help: "Redis calls that failed (the attempt was allowed: fail-open), by op: check, record, state.",
		}, []string{"op"}),
		invalid: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_gate_state_invalid_total",
			Help: "Gate state read from Redis that no worker writes (wrong type, not JSON, out of range), treated as absent and the attempt allowed (fail-open), by gate: breaker, probe, rate_limit.",
		}, []string{"gate"}),
	}
	for _, tr := range [][2]string{{"closed", "open"}, {"open", "half-open"}, {"half-open", "closed"}, {"half-open", "open"}} {
		m.transitions.WithLabelValues(tr[0], tr[1])
	}
	for _, r := range []Reason{ReasonRateLimited, ReasonCircuitOpen, ReasonProbeBusy} {
		m.deferrals.WithLabelValues(r.String())
	}
	for _, op := range []string{"check", "record", "state"} {
		m.redisErrors.WithLabelValues(op)
	}
	for _, g := range invalidBits {
		m.invalid.WithLabelValues(g.gate)
	}
	return m
}
