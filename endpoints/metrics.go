package endpoints

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	disabled *prometheus.CounterVec
	// certDaysLeft and secretUnreadable are set by the worker's Store
	// (LoadClientCerts, SecretUnreadable).
	certDaysLeft     *prometheus.GaugeVec
	secretUnreadable *prometheus.GaugeVec
	// pausedUntil is set by RunClientCerts's reads (LoadFlows).
	pausedUntil *prometheus.GaugeVec
}

// newMetrics registers the package's metrics with reg; nil registers
// nothing (the counters still count).
func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		disabled: f.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_endpoints_disabled_total",
			Help: "Endpoints disabled by this process, by reason: gone (410), failing (every attempt failed for WEBHOOK_ENDPOINT_DISABLE_AFTER), operator.",
		}, []string{"reason"}),
		certDaysLeft: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_endpoint_client_cert_days_left",
			Help: "Days until each endpoint's client certificate expires (negative: expired), read every 10 s.",
		}, []string{"endpoint"}),
		secretUnreadable: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_endpoint_secret_unreadable",
			Help: "1 while this worker cannot open the endpoint's secret with its key file: the endpoint's rows are kept pending, not attempted, until a worker holding the key sends them.",
		}, []string{"endpoint"}),
		pausedUntil: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_endpoint_paused_until_seconds",
			Help: "When the pause its consumer asked for (429 or 503 with Retry-After) ends, as a Unix time, for each endpoint paused now, read every 10 s; no series while none is.",
		}, []string{"endpoint"}),
	}
	for _, c := range causes {
		m.disabled.WithLabelValues(string(c))
	}
	return m
}
