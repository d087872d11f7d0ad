// Package retention keeps the history (processed outbox rows and the
// attempt history, webhook_attempts) in time partitions and removes it
// after the retention period: it creates the partitions ahead of time,
// drops each one whole once its newest possible row is past the retention,
// deletes in small batches the rows of the default partitions (those no
// time partition covered) past the retention, and moves the others, in
// small batches, into partitions of their time, so that the default
// partitions stay small. It also removes the ordering lanes idle for the
// retention. Dropping a partition is one short lock, not a DELETE: the
// outbox's pending rows, in their own partition, never see it. Of several
// workers, one deletes, moves or prunes at a time (a transaction-scoped
// advisory lock taken by each batch's statement, which works through
// PgBouncer in transaction mode too).
package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
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
	// DailyFrom is the shortest retention kept in daily partitions;
	// a shorter one is kept in hourly partitions, down to HourlyFrom.
	DailyFrom = 48 * time.Hour
	// HourlyFrom is the shortest retention kept in hourly partitions; a
	// shorter one is kept in partitions of ShortWidth, so that history
	// stays within the retention and one such width.
	HourlyFrom = 2 * time.Hour
	// ShortWidth is the partitions' width below HourlyFrom.
	ShortWidth = 10 * time.Minute
	// LanesPerRound is the most ordering lanes a round looks at; the next
	// round goes on from there.
	LanesPerRound = 200_000
	// RetryAfter is how soon a round that failed (a partition's lock not
	// had in time, say) is tried again, when Interval is longer.
	RetryAfter = 30 * time.Second
	lockKey    = 0x666c75786f7262 // "fluxorb": one deleter across workers
)

// Config configures a Deleter.
type Config struct {
	// Pool supplies one connection per round. Required.
	Pool *pgxpool.Pool
	// Retention is how long history is kept: a row is removed at least
	// Retention after it was processed (or attempted), and at most one
	// partition width later (PartitionWidth). 0 keeps it forever (the
	// partitions are still made); negative is an error.
	Retention time.Duration
	// Interval between rounds. Defaults to min(Retention/10, IntervalMax),
	// IntervalMax when Retention is 0.
	Interval time.Duration
	// BatchSize is the most rows per statement on a default partition
	// (a DELETE, a move), and the ordering lanes a statement looks at.
	// Defaults to BatchSizeDefault.
	BatchSize int
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Registerer receives the retention's counters. Required.
	Registerer prometheus.Registerer
}

// PartitionWidth is the width of the history's time partitions for a
// retention: ShortWidth below HourlyFrom, an hour below DailyFrom, a day
// from it on and when history is kept forever (0).
func PartitionWidth(retention time.Duration) time.Duration {
	switch {
	case retention > 0 && retention < HourlyFrom:
		return ShortWidth
	case retention > 0 && retention < DailyFrom:
		return time.Hour
	}
	return 24 * time.Hour
}

// Deleter runs retention rounds, through the store's statements (package
// outbox).
type Deleter struct {
	cfg      Config
	store    *outbox.Store
	deleted  prometheus.Counter
	attempts prometheus.Counter
	dropped  prometheus.Counter
	moved    map[string]prometheus.Counter // by history parent
	pruned   prometheus.Counter
	// lanes is where the walk of the ordering lanes stands: each round
	// goes on from the last (Run's rounds are sequential).
	lanes outbox.LaneCursor
	// prepared is set by a Prepare that succeeded and taken by the next
	// round, which then need not prepare again: the worker prepares before
	// it claims, and its first round follows at once.
	prepared atomic.Bool
}

// New returns a Deleter or an error naming the bad field.
func New(cfg Config) (*Deleter, error) {
	if cfg.Pool == nil || cfg.Registerer == nil {
		return nil, errors.New("retention: Pool and Registerer are required")
	}
	if cfg.Retention < 0 {
		return nil, errors.New("retention: Retention must not be negative")
	}
	store, err := outbox.New(cfg.Pool)
	if err != nil {
		return nil, err
	}
	cfg.Interval = cmp.Or(cfg.Interval, min(cfg.Retention/10, IntervalMax), IntervalMax)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	f := promauto.With(cfg.Registerer)
	d := &Deleter{cfg: cfg, store: store, deleted: f.NewCounter(prometheus.CounterOpts{
		Name: "fluxora_webhook_retention_deleted_rows_total",
		Help: "Processed outbox rows deleted one by one by retention (those of the default partition; whole partitions are counted in retention_dropped_partitions_total).",
	}), attempts: f.NewCounter(prometheus.CounterOpts{
		Name: "fluxora_webhook_retention_deleted_attempts_total",
		Help: "Rows of webhook_attempts (the attempt history) deleted one by one by retention (those of the default partition).",
	}), dropped: f.NewCounter(prometheus.CounterOpts{
		Name: "fluxora_webhook_retention_dropped_partitions_total",
		Help: "Time partitions of the history (processed outbox rows, attempts) dropped whole by retention.",
	})}
	d.moved = map[string]prometheus.Counter{
		outbox.HistoryParents[0]: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_retention_moved_rows_total",
			Help: "Processed outbox rows moved by retention from the default partition into a partition of their time.",
		}),
		outbox.HistoryParents[1]: f.NewCounter(prometheus.CounterOpts{
			Name: "fluxora_webhook_retention_moved_attempts_total",
			Help: "Rows of webhook_attempts moved by retention from the default partition into a partition of their time.",
		}),
	}
	d.pruned = f.NewCounter(prometheus.CounterOpts{
		Name: "fluxora_webhook_retention_pruned_lanes_total",
		Help: "Ordering lanes removed by retention: idle for the retention, nothing pending, no dead letter holding them.",
	})
	return d, nil
}

// Prepare creates the time partitions the history needs from one
// partition width ago to two widths ahead (the worker calls it before it
// claims anything; the round right after a successful Prepare leaves it
// out, every later round does it again); it returns how many it made. Rows no partition covers go to the default partitions, so a
// failure here loses nothing.
func (d *Deleter) Prepare(ctx context.Context) (int, error) {
	made, err := d.prepare(ctx)
	d.prepared.Store(err == nil)
	return made, err
}

// prepare is Prepare without marking the work done for the next round.
func (d *Deleter) prepare(ctx context.Context) (int, error) {
	w := PartitionWidth(d.cfg.Retention)
	made, err := d.store.PrepareHistory(ctx, w, 2*w)
	if err != nil {
		return 0, fmt.Errorf("retention: %w", err)
	}
	return made, nil
}

// Run runs a round every Interval until ctx ends, and RetryAfter after a
// round that failed; the first round runs at once.
func (d *Deleter) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		next := d.cfg.Interval
		if n, skipped, err := d.RunOnce(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Logger.Warn("retention: round failed; trying again soon", "error", err)
			next = min(next, RetryAfter)
		} else if n > 0 {
			d.cfg.Logger.Info("retention: deleted processed rows", "rows", n, "skipped", skipped)
		}
		t.Reset(next)
	}
}

// RunOnce prepares the partitions ahead (unless Prepare just did), then,
// unless history is kept forever, drops the partitions past the retention
// and deletes the old rows of the default partitions (processed rows, then
// attempts) in batches until none is left; then moves the default
// partitions' other rows into partitions of their time (moveDefaults),
// and, unless history is kept forever, removes the ordering lanes idle for
// the retention (pruneLanes). deleted counts the rows deleted one by one;
// skipped is true when another worker holds the retention lock, and the
// round then stops.
func (d *Deleter) RunOnce(ctx context.Context) (deleted int64, skipped bool, err error) {
	if !d.prepared.Swap(false) {
		if _, err := d.prepare(ctx); err != nil {
			return 0, false, err
		}
	}
	if d.cfg.Retention > 0 {
		names, err := d.store.DropHistoryBefore(ctx, d.cfg.Retention)
		d.dropped.Add(float64(len(names)))
		for _, name := range names {
			d.cfg.Logger.Info("retention: dropped a history partition", "partition", name)
		}
		if err != nil {
			return 0, false, fmt.Errorf("retention: %w", err)
		}
		if deleted, skipped, err = d.deleteDefaults(ctx); err != nil || skipped {
			return deleted, skipped, err
		}
	}
	if skipped, err = d.moveDefaults(ctx); err != nil || skipped {
		return deleted, skipped, err
	}
	if d.cfg.Retention > 0 {
		skipped, err = d.pruneLanes(ctx)
	}
	return deleted, skipped, err
}

// deleteDefaults deletes, in batches, the default partitions' rows past
// the retention.
func (d *Deleter) deleteDefaults(ctx context.Context) (deleted int64, skipped bool, err error) {
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
