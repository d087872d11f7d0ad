package listener

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	notifications prometheus.Counter
	connects      prometheus.Counter
	errors        prometheus.Counter
	connected     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		notifications: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_notifications_received_total",
			Help: "NOTIFY messages received from the outbox trigger.",
		}),
		connects: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_listener_connects_total",
			Help: "Times the listener connected and started LISTEN (1 + reconnects).",
		}),
		errors: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_listener_errors_total",
			Help: "Listener connection errors (each is followed by a reconnect).",
		}),
		connected: f.NewGauge(prometheus.GaugeOpts{
			Name: "fluxora_webhook_listener_connected",
			Help: "1 while LISTEN is active on a live connection, else 0.",
		}),
	}
}
