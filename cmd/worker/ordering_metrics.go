package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fluxora/webhook-worker/outbox"
)

// blockedKeysEvery is how often the workers read the blocked ordering keys
// for their gauges: 30 s, as the read grows with the keys blocked and
// the rows waiting behind them (and costs nothing when no key waits), so
// that many workers do not make it a load of its own.
const blockedKeysEvery = 30 * time.Second

// blockedKeys sets fluxora_webhook_ordering_blocked_keys and
// fluxora_webhook_ordering_blocked_oldest_seconds by endpoint from
// outbox.BlockedKeysSQL, at start and every blockedKeysEvery. Every worker
// reports the same figures: aggregate them with max, not sum.
type blockedKeys struct {
	store  *outbox.Store
	log    *slog.Logger
	keys   *prometheus.GaugeVec
	oldest *prometheus.GaugeVec
}

func newBlockedKeys(store *outbox.Store, log *slog.Logger, reg prometheus.Registerer) *blockedKeys {
	f := promauto.With(reg)
	return &blockedKeys{store: store, log: log,
		keys: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_ordering_blocked_keys",
			Help: "Ordering keys of each endpoint that cannot move now: their head's retry is later, or a dead letter holds them (read every 30 s; the same in every worker).",
		}, []string{"endpoint"}),
		oldest: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_ordering_blocked_oldest_seconds",
			Help: "How long the longest blocked ordering key of each endpoint has waited, in seconds (read every 30 s).",
		}, []string{"endpoint"})}
}

// load reads the blocked keys and replaces the gauges' values.
func (b *blockedKeys) load(ctx context.Context) error {
	list, err := b.store.BlockedKeys(ctx)
	if err != nil {
		return err
	}
	b.keys.Reset()
	b.oldest.Reset()
	for _, k := range list {
		b.keys.WithLabelValues(k.Endpoint).Set(float64(k.Keys))
		b.oldest.WithLabelValues(k.Endpoint).Set(k.OldestSecs)
	}
	return nil
}

// Run reads the blocked keys at once and every blockedKeysEvery until ctx
// ends; a failed read is logged and tried at the next tick.
func (b *blockedKeys) Run(ctx context.Context) error {
	return refresh(ctx, blockedKeysEvery, true, b.load, b.log, "worker: blocked ordering keys not read")
}
