package endpoints

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	disabled *prometheus.CounterVec
}

// newMetrics registers the package's metrics with reg; nil registers
// nothing (the counters still count).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		disabled: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_endpoints_disabled_total",
			Help: "Endpoints disabled by this process, by reason: gone (410), failing (every attempt failed for WEBHOOK_ENDPOINT_DISABLE_AFTER), operator.",
		}, []string{"reason"}),
	}
	for _, c := range causes {
		m.disabled.WithLabelValues(string(c))
	}
	return m
}
