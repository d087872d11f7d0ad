package tracing

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The reasons of fluxora_webhook_trace_spans_dropped_total.
const (
	// reasonQueueFull: the export queue was full when the span ended (the
	// collector slow or down, or spans ending faster than they go out).
	reasonQueueFull = "queue_full"
	// reasonExportFailed: the span's batch was not accepted (collector
	// unreachable or refusing, the export's time out, or the shutdown's
	// deadline reached).
	reasonExportFailed = "export_failed"
)

type metrics struct {
	queueFull    prometheus.Counter
	exportFailed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	dropped := promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "fluxora_webhook_trace_spans_dropped_total",
		Help: "Spans not exported, by reason: queue_full (the export queue was full) or export_failed (the collector did not accept them).",
	}, []string{"reason"})
	return &metrics{queueFull: dropped.WithLabelValues(reasonQueueFull), exportFailed: dropped.WithLabelValues(reasonExportFailed)}
}
