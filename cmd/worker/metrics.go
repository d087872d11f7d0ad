package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/sender"
)

// metrics are the dispatcher's; the listener and the gates register their
// own on the same registry.
type metrics struct {
	deliveries   *prometheus.CounterVec
	attempts     *prometheus.HistogramVec
	lag          prometheus.Histogram
	batches      prometheus.Counter
	rows         prometheus.Counter
	pollWakeups  prometheus.Counter
	retries      prometheus.Counter
	deadLetters  prometheus.Counter
	deferrals    prometheus.Counter
	claimErrors  prometheus.Counter
	commitErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := buildMetrics(promauto.With(reg))
	// Every label value exists from the start, so dashboards and alerts see 0
	// rather than nothing.
	for _, o := range []string{"delivered", "retried", "dead_lettered", "deferred"} {
		m.deliveries.WithLabelValues(o)
	}
	for _, r := range []sender.Outcome{sender.Delivered, sender.Retryable, sender.Permanent} {
		m.attempts.WithLabelValues(r.String())
	}
	return m
}

func buildMetrics(f promauto.Factory) *metrics {
	latency := []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	return &metrics{
		deliveries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_deliveries_total",
			Help: "Claimed rows by recorded outcome: delivered, retried, dead_lettered, deferred.",
		}, []string{"outcome"}),
		attempts: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fluxora_webhook_attempt_duration_seconds",
			Help:    "HTTP attempt latency by result: delivered, retryable, permanent.",
			Buckets: latency,
		}, []string{"result"}),
		lag: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "fluxora_webhook_end_to_end_lag_seconds",
			Help:    "From a row's created_at (insert, or due time of a retry) to the commit recording its delivery.",
			Buckets: latency,
		}),
		batches: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_claimed_batches_total", Help: "Claims that returned at least one row.",
		}),
		rows: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_claimed_rows_total", Help: "Rows claimed.",
		}),
		pollWakeups: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_poll_wakeups_total", Help: "Fallback poll ticks (WEBHOOK_POLL_INTERVAL_MS).",
		}),
		retries: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_retries_scheduled_total", Help: "Retryable failures scheduled as a new attempt row.",
		}),
		deadLetters: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_dead_letters_total", Help: "Events moved to webhook_dead_letter.",
		}),
		deferrals: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_deferred_total", Help: "Rows re-enqueued unattempted because a gate refused them.",
		}),
		claimErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_claim_errors_total", Help: "Claims that failed (database trouble).",
		}),
		commitErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_commit_errors_total", Help: "Batches whose outcomes could not be committed; their rows are delivered again.",
		}),
	}
}

func (m *metrics) attempt(r sender.Result) {
	m.attempts.WithLabelValues(r.Outcome.String()).Observe(r.Duration.Seconds())
}

// recorded counts a committed outcome; lag is now minus the row's created_at.
func (m *metrics) recorded(o claimer.Outcome, lag time.Duration) {
	switch o.Kind {
	case claimer.Done:
		m.deliveries.WithLabelValues("delivered").Inc()
		m.lag.Observe(lag.Seconds())
	case claimer.Retry:
		m.deliveries.WithLabelValues("retried").Inc()
		m.retries.Inc()
	case claimer.Dead:
		m.deliveries.WithLabelValues("dead_lettered").Inc()
		m.deadLetters.Inc()
	case claimer.Defer:
		m.deliveries.WithLabelValues("deferred").Inc()
		m.deferrals.Inc()
	}
}
