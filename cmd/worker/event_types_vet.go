package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/eventtypes"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// newCatalog reads the event catalog once, before the first claim, and
// returns it kept current (its Run reads the state every second).
func newCatalog(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (*eventtypes.Live, error) {
	store, err := outbox.New(pool)
	if err != nil {
		return nil, err
	}
	live, err := eventtypes.NewLive(eventtypes.LiveConfig{
		State: func(ctx context.Context) (bool, int64, error) {
			st, err := store.EventCatalogState(ctx)
			return st.Strict, st.Version, err
		},
		Load:   store.EventTypes,
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return live, live.Refresh(ctx)
}

// catalogVetter is the dispatcher's Vetter: the event catalog's rules
// (strict mode, the payload's schema) before a delivery's first attempt.
type catalogVetter struct{ live *eventtypes.Live }

var _ dispatcher.Vetter = catalogVetter{}

// Vet refuses what the catalog refuses; a catalog it cannot read, or a
// schema that does not compile, leaves the delivery pending for later.
func (v catalogVetter) Vet(ctx context.Context, r webhook.Delivery) error {
	err := v.live.Check(ctx, r.EventType, r.Payload)
	if errors.Is(err, eventtypes.ErrUnavailable) || errors.Is(err, eventtypes.ErrSchemaBroken) {
		return fmt.Errorf("%w: %w", dispatcher.ErrVetLater, err)
	}
	return err
}
