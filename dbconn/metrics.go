package dbconn

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	resets *prometheus.CounterVec
}

// newMetrics registers the pool's metrics with reg (nil: none), each
// reason at 0 from the start.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{resets: promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "fluxora_webhook_database_resets_total",
		Help: "Times the worker dropped every database connection because a statement found the server read-only, shutting down or gone (a failover, a restart), by reason.",
	}, []string{"reason"})}
	for _, r := range []string{lostReadOnly, lostShutdown, lostConnection} {
		m.resets.WithLabelValues(r)
	}
	return m
}
