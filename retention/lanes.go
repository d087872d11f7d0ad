package retention

import (
	"context"
	"fmt"

	"github.com/fluxora/webhook-worker/outbox"
)

// pruneLanes goes on with the walk of the ordering lanes, at most
// LanesPerRound of them, removing those idle for the retention with
// nothing pending and no dead letter holding them
// (outbox.Store.PruneLanes): a key used once, an order's id, keeps no row
// for ever. The walk starts again from the first lane after the last.
func (d *Deleter) pruneLanes(ctx context.Context) (skipped bool, err error) {
	var removed int64
	for seen := 0; seen < LanesPerRound && ctx.Err() == nil; seen += d.cfg.BatchSize {
		n, next, got, err := d.store.PruneLanes(ctx, d.lanes, d.cfg.Retention, d.cfg.BatchSize, lockKey)
		if err != nil {
			return false, fmt.Errorf("retention: %w", err)
		}
		if !got {
			return true, nil
		}
		removed += n
		d.pruned.Add(float64(n))
		d.lanes = next
		if next == (outbox.LaneCursor{}) {
			break
		}
	}
	if removed > 0 {
		d.cfg.Logger.Info("retention: removed idle ordering lanes", "lanes", removed)
	}
	return false, ctx.Err()
}
