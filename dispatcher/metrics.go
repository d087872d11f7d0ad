package dispatcher

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fluxora/webhook-worker/webhook"
)

// metrics are the dispatcher's; the listener and the gates register their
// own on the same registry.
type metrics struct {
	deliveries    *prometheus.CounterVec
	attempts      *prometheus.HistogramVec
	lag           *prometheus.HistogramVec
	fannedOut     prometheus.Counter
	unrouted      prometheus.Counter
	undecodable   prometheus.Counter
	capWaits      *prometheus.CounterVec
	limitCuts     *prometheus.CounterVec
	parks         *prometheus.CounterVec
	batches       prometheus.Counter
	rows          prometheus.Counter
	pollWakeups   prometheus.Counter
	retries       prometheus.Counter
	deadLetters   prometheus.Counter
	deferrals     prometheus.Counter
	claimErrors   prometheus.Counter
	commitErrors  prometheus.Counter
	inFlight      prometheus.Gauge
	reclaimed     prometheus.Counter
	leasesLost    prometheus.Counter
	flushSize     prometheus.Histogram
	flushDuration prometheus.Histogram
	claimDuration prometheus.Histogram
	released      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, env bool) *metrics {
	m := buildMetrics(promauto.With(reg))
	// The WEBHOOK_URL endpoint's label values exist from the start, so
	// dashboards and alerts see 0 rather than nothing; a table endpoint's
	// appear with its first outcome.
	if env {
		for _, o := range []string{"delivered", "retried", "dead_lettered", "deferred"} {
			m.deliveries.WithLabelValues(o, DefaultEndpointName)
		}
		for _, c := range []webhook.Class{webhook.Delivered, webhook.Retryable, webhook.Permanent} {
			m.attempts.WithLabelValues(c.String(), DefaultEndpointName)
		}
		m.lag.WithLabelValues(DefaultEndpointName)
	}
	return m
}

func buildMetrics(f promauto.Factory) *metrics {
	latency := []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	counter := func(name, help string) prometheus.Counter {
		return f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &metrics{
		deliveries: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_deliveries_total",
			Help: "Claimed rows by recorded outcome (delivered, retried, dead_lettered, deferred) and endpoint name.",
		}, []string{"outcome", "endpoint"}),
		attempts: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fluxora_webhook_attempt_duration_seconds",
			Help:    "HTTP attempt latency by result (delivered, retryable, permanent) and endpoint name.",
			Buckets: latency,
		}, []string{"result", "endpoint"}),
		lag: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fluxora_webhook_end_to_end_lag_seconds",
			Help:    "From a row's created_at (the event's insert, or the due time of a retry) to the write recording its delivery, by endpoint name.",
			Buckets: latency,
		}, []string{"endpoint"}),
		fannedOut: counter("fluxora_webhook_events_fanned_out_total", "Events fanned out to their endpoints (once per event)."),
		unrouted: counter("fluxora_webhook_events_unrouted_total",
			"Events recorded as unrouted: no WEBHOOK_URL endpoint and no enabled endpoint subscribed to their type."),
		undecodable: counter("fluxora_webhook_undecodable_rows_total",
			"Claimed rows the worker could not decode (a time out of range), each moved to the dead letter alone."),
		capWaits: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_endpoint_cap_waits_total",
			Help: "Rows given back unattempted because their endpoint was at its concurrency limit in this worker (the claim keeps to each endpoint's room, so this stays rare), by endpoint name.",
		}, []string{"endpoint"}),
		limitCuts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_endpoint_limit_cuts_total",
			Help: "Times an endpoint's adaptive concurrency limit was halved after a retryable failure (timeout, 5xx, refused connection), by endpoint name.",
		}, []string{"endpoint"}),
		parks: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_endpoint_parks_total",
			Help: "Times an endpoint was parked (not claimed for, its rows not read) because a gate deferred its row: breaker open or retry budget spent, by endpoint name.",
		}, []string{"endpoint"}),
		batches:     counter("fluxora_webhook_claimed_batches_total", "Claims that returned at least one row."),
		rows:        counter("fluxora_webhook_claimed_rows_total", "Rows claimed."),
		pollWakeups: counter("fluxora_webhook_poll_wakeups_total", "Fallback poll ticks (WEBHOOK_POLL_INTERVAL_MS)."),
		retries:     counter("fluxora_webhook_retries_scheduled_total", "Retryable failures scheduled as a new attempt row."),
		deadLetters: counter("fluxora_webhook_dead_letters_total", "Events moved to webhook_dead_letter."),
		deferrals:   counter("fluxora_webhook_deferred_total", "Rows re-enqueued unattempted because a gate refused them."),
		claimErrors: counter("fluxora_webhook_claim_errors_total", "Claims that failed (database trouble)."),
		commitErrors: counter("fluxora_webhook_commit_errors_total",
			"Outcome writes that failed (database trouble); each is tried again while the rows' leases last."),
		inFlight: f.NewGauge(prometheus.GaugeOpts{
			Name: "fluxora_webhook_rows_in_flight",
			Help: "Rows this worker holds under a lease: claimed, and not yet recorded or released.",
		}),
		reclaimed: counter("fluxora_webhook_leases_reclaimed_total",
			"Rows this worker claimed after another holder's lease expired without an outcome (a worker died, froze or lost the database)."),
		leasesLost: counter("fluxora_webhook_leases_lost_total",
			"Outcomes refused by the lease fence: the row's lease had expired and another worker had claimed it."),
		released: counter("fluxora_webhook_rows_released_total",
			"Rows given back unattempted at shutdown, for another worker to take at once."),
		flushSize: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "fluxora_webhook_outcome_flush_size",
			Help:    "Outcomes written per statement.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}),
		claimDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "fluxora_webhook_claim_duration_seconds",
			Help:    "Time of one claim (one statement, one round trip), empty ones included.",
			Buckets: latency,
		}),
		flushDuration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "fluxora_webhook_outcome_flush_duration_seconds",
			Help:    "Time to write one batch of outcomes (one statement, one round trip).",
			Buckets: latency,
		}),
	}
}

func (m *metrics) attempt(endpoint string, r webhook.Result) {
	m.attempts.WithLabelValues(r.Class.String(), endpoint).Observe(r.Duration.Seconds())
}

// recorded counts a written outcome; lag is now minus the row's created_at.
func (m *metrics) recorded(endpoint string, k webhook.Kind, lag time.Duration) {
	switch k {
	case webhook.Done:
		m.deliveries.WithLabelValues("delivered", endpoint).Inc()
		m.lag.WithLabelValues(endpoint).Observe(lag.Seconds())
	case webhook.Retry:
		m.deliveries.WithLabelValues("retried", endpoint).Inc()
		m.retries.Inc()
	case webhook.Dead:
		m.deliveries.WithLabelValues("dead_lettered", endpoint).Inc()
		m.deadLetters.Inc()
	case webhook.Defer:
		m.deliveries.WithLabelValues("deferred", endpoint).Inc()
		m.deferrals.Inc()
	case webhook.Release:
		m.released.Inc()
	}
}
