// Package retention deletes processed outbox rows, and attempt history
// (webhook_attempts), older than the retention period, in small batches, by at most one worker at a time (a
// transaction-scoped advisory lock taken by each batch's transaction, which
// works through PgBouncer in transaction mode too), so the outbox stays
// small after months of traffic without long locks.
package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fluxora/webhook-worker/outbox"
)

const (
	// BatchSizeDefault is the most rows one DELETE removes.
	BatchSizeDefault = 1000
	// IntervalMax caps the default interval between rounds.
	IntervalMax = 5 * time.Minute
	lockKey     = 0x666c75786f7262 // "fluxorb": one deleter across workers
)

// Config configures a Deleter.
type Config struct {
	// Pool supplies one connection per round. Required.
	Pool *pgxpool.Pool
	// Retention is how long processed rows are kept. Required (> 0).
	Retention time.Duration
	// Interval between rounds. Defaults to min(Retention/10, IntervalMax).
	Interval time.Duration
	// BatchSize is the most rows per DELETE. Defaults to BatchSizeDefault.
	BatchSize int
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Registerer receives fluxora_webhook_retention_deleted_rows_total.
	// Required.
	Registerer prometheus.Registerer
}

// Deleter runs retention rounds, through the store's statements (package
// outbox).
type Deleter struct {
	cfg      Config
	store    *outbox.Store
	deleted  prometheus.Counter
	attempts prometheus.Counter
}

// New returns a Deleter or an error naming the bad field.
func New(cfg Config) (*Deleter, error) {
	if cfg.Pool == nil || cfg.Registerer == nil {
		return nil, errors.New("retention: Pool and Registerer are required")
	}
	if cfg.Retention <= 0 {
		return nil, errors.New("retention: Retention must be positive")
	}
	store, err := outbox.New(cfg.Pool)
	if err != nil {
		return nil, err
	}
	cfg.Interval = cmp.Or(cfg.Interval, min(cfg.Retention/10, IntervalMax))
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return &Deleter{cfg: cfg, store: store, deleted: promauto.With(cfg.Registerer).NewCounter(prometheus.CounterOpts{
		Name: "fluxora_webhook_retention_deleted_rows_total",
		Help: "Processed outbox rows deleted by retention.",
	}), attempts: promauto.With(cfg.Registerer).NewCounter(prometheus.CounterOpts{
		Name: "fluxora_webhook_retention_deleted_attempts_total",
		Help: "Rows of webhook_attempts (the attempt history) deleted by retention.",
	})}, nil
}

// Run deletes every Interval until ctx ends; the first round runs at once.
func (d *Deleter) Run(ctx context.Context) error {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		if n, skipped, err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("retention: round failed", "error", err)
		} else if n > 0 {
			d.cfg.Logger.Info("retention: deleted processed rows", "rows", n, "skipped", skipped)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce deletes old processed rows, then old attempts, in batches until
// none is left. skipped is true when another worker holds the retention
// lock; the round then stops.
func (d *Deleter) RunOnce(ctx context.Context) (deleted int64, skipped bool, err error) {
	steps := []struct {
		what    string
		batch   func(ctx context.Context, retention time.Duration, batch int, lockKey int64) (int64, bool, error)
		counter prometheus.Counter
		outbox  bool // counted in deleted
	}{{"delete", d.store.DeleteProcessedBefore, d.deleted, true}, {"delete attempts", d.store.DeleteAttemptsBefore, d.attempts, false}}
	for _, step := range steps {
		for {
			n, got, err := step.batch(ctx, d.cfg.Retention, d.cfg.BatchSize, lockKey)
			if err != nil {
				return deleted, false, fmt.Errorf("retention: %s: %w", step.what, err)
			}
			if !got {
				return deleted, true, nil
			}
			step.counter.Add(float64(n))
			if step.outbox {
				deleted += n
			}
			if n < int64(d.cfg.BatchSize) {
				break
			}
		}
	}
	return deleted, false, nil
}
