package main

import (
	"context"
	"log/slog"
	"time"
)

// refresh calls load every `every` until ctx ends, and once at the start
// too when now is set. A failed load is logged at warn with msg and tried
// again at the next tick. It returns nil when ctx ends.
func refresh(ctx context.Context, every time.Duration, now bool, load func(context.Context) error, log *slog.Logger, msg string) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if now {
			if err := load(ctx); err != nil && ctx.Err() == nil {
				log.Warn(msg, "error", err)
			}
		}
		now = true
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
