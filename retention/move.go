package retention

import (
	"context"
	"fmt"

	"github.com/fluxora/webhook-worker/outbox"
)

// moveDefaults moves the rows of the default partitions not past the
// retention (and not beyond the partitions made ahead) into partitions of
// their time, a batch a statement, then attaches each range whose rows all
// left the default (outbox.Store.MoveHistory, AttachHistory). A default
// partition that stays small costs little to the creation of a partition,
// which reads it; a claim or a record never waits for a batch.
func (d *Deleter) moveDefaults(ctx context.Context) (skipped bool, err error) {
	w := PartitionWidth(d.cfg.Retention)
	for _, parent := range outbox.HistoryParents {
		m := outbox.HistoryMove{Parent: parent, Width: w, Retention: d.cfg.Retention, Ahead: 2 * w, Batch: d.cfg.BatchSize, LockKey: lockKey}
		var moved int64
		for ctx.Err() == nil {
			n, got, err := d.store.MoveHistory(ctx, m)
			if err != nil {
				return false, fmt.Errorf("retention: %w", err)
			}
			if !got {
				return true, nil
			}
			if n == 0 {
				break
			}
			moved += n
			d.moved[parent].Add(float64(n))
		}
		names, err := d.store.AttachHistory(ctx, parent, d.cfg.BatchSize)
		if moved > 0 || len(names) > 0 {
			d.cfg.Logger.Info("retention: moved rows of the default partition into partitions of their time",
				"table", parent, "rows", moved, "partitions", len(names))
		}
		if err != nil {
			return false, fmt.Errorf("retention: %w", err)
		}
	}
	return false, ctx.Err()
}
