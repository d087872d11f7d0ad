package main

import (
	"context"
	"sync"

	"github.com/fluxora/webhook-worker/claimer"
)

// runBatch delivers every row of b concurrently, then records all outcomes
// and commits in one round trip. If the commit fails, the rows stay pending
// and will be delivered again (at-least-once).
func (d *dispatcher) runBatch(ctx context.Context, b *claimer.Batch) {
	defer d.wg.Done()
	outcomes := make([]claimer.Outcome, len(b.Rows))
	if len(b.Rows) == 1 {
		outcomes[0] = d.deliver(ctx, b.Rows[0])
	} else {
		var wg sync.WaitGroup
		for i := range b.Rows {
			wg.Go(func() { outcomes[i] = d.deliver(ctx, b.Rows[i]) })
		}
		wg.Wait()
	}
	res := batchResult{rows: len(b.Rows)}
	if err := b.Complete(ctx, outcomes); err != nil {
		d.cfg.Metrics.commitErrors.Inc()
		d.cfg.Logger.Error("dispatcher: recording a batch failed; its rows stay pending and will be delivered again",
			"rows", len(b.Rows), "error", err)
		d.done <- res
		return
	}
	now := d.cfg.Now()
	for i, o := range outcomes {
		d.cfg.Metrics.recorded(o, now.Sub(b.Rows[i].CreatedAt))
		if o.Kind == claimer.Retry || o.Kind == claimer.Defer {
			if !res.hasNext || o.Delay < res.next {
				res.next, res.hasNext = o.Delay, true
			}
		}
	}
	d.done <- res
}
