// Package ordering reports the state of the ordering lanes (an ordering
// key at its endpoint, migration 015) that operators watch: the keys that
// cannot move now, because their head's retry is later or a dead letter
// holds them, and how long the longest of them has waited. The figures
// are the store's (outbox.Store.BlockedKeys), read on a period of their
// own; every worker reports the same, so they are aggregated with max,
// not sum.
package ordering

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/outbox"
)

// EveryDefault is the default Config.Every: 30 s, as the read grows with
// the keys blocked and the rows waiting behind them (and costs nothing
// when no key waits), so that many workers do not make it a load of its
// own.
const EveryDefault = 30 * time.Second

// Store is the store's query Blocked reads.
type Store interface {
	// BlockedKeys lists, by endpoint name, the blocked keys.
	BlockedKeys(ctx context.Context) ([]outbox.BlockedKeys, error)
}

// Config configures Blocked.
type Config struct {
	// Store is read for the blocked keys. Required.
	Store Store
	// Registerer receives fluxora_webhook_ordering_blocked_keys and
	// fluxora_webhook_ordering_blocked_oldest_seconds. Nil: no metrics.
	Registerer prometheus.Registerer
	// Logger receives the failed reads. Defaults to discarding.
	Logger *slog.Logger
	// Every is how often Run reads the blocked keys. Defaults to 30 s
	// (EveryDefault); must not be negative.
	Every time.Duration
}

// Blocked sets the gauges of the blocked ordering keys by endpoint.
type Blocked struct {
	store Store
	log   *slog.Logger
	every time.Duration
	m     *metrics
}

// New returns a Blocked, or an error naming the field.
func New(cfg Config) (*Blocked, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("ordering: Store is required")
	case cfg.Every < 0:
		return nil, errors.New("ordering: Every must not be negative")
	}
	return &Blocked{store: cfg.Store, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		every: cmp.Or(cfg.Every, EveryDefault), m: newMetrics(cfg.Registerer)}, nil
}

// Load reads the blocked keys and replaces the gauges' values.
func (b *Blocked) Load(ctx context.Context) error {
	list, err := b.store.BlockedKeys(ctx)
	if err != nil {
		return err
	}
	b.m.keys.Reset()
	b.m.oldest.Reset()
	for _, k := range list {
		b.m.keys.WithLabelValues(k.Endpoint).Set(float64(k.Keys))
		b.m.oldest.WithLabelValues(k.Endpoint).Set(k.OldestSecs)
	}
	return nil
}

// Run reads the blocked keys at once and every Every until ctx ends; a
// failed read is logged and tried at the next tick. It returns nil when
// ctx ends.
func (b *Blocked) Run(ctx context.Context) error {
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		if err := b.Load(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("ordering: blocked ordering keys not read", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
