package ordering

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	keys   *prometheus.GaugeVec
	oldest *prometheus.GaugeVec
}

// newMetrics registers the package's metrics with reg; nil registers
// nothing (the gauges are still set).
func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		keys: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_ordering_blocked_keys",
			Help: "Ordering keys of each endpoint that cannot move now: their head's retry is later, or a dead letter holds them (read every 30 s; the same in every worker).",
		}, []string{"endpoint"}),
		oldest: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_ordering_blocked_oldest_seconds",
			Help: "How long the longest blocked ordering key of each endpoint has waited, in seconds (read every 30 s).",
		}, []string{"endpoint"}),
	}
}
