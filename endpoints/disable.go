package endpoints

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxora/webhook-worker/outbox"
)

// Cause is why an endpoint is disabled: the reason label of
// fluxora_webhook_endpoints_disabled_total.
type Cause string

// The causes of Disable.
const (
	// Gone: the endpoint answered 410 Gone.
	Gone Cause = "gone"
	// Failing: every attempt has failed for WEBHOOK_ENDPOINT_DISABLE_AFTER.
	Failing Cause = "failing"
	// Operator: `worker endpoints disable`.
	Operator Cause = "operator"
)

var causes = []Cause{Gone, Failing, Operator}

// Disable disables the endpoint with id and moves its pending deliveries
// that no worker holds under a live lease to the dead-letter table, with
// their headers and "endpoint NAME disabled: REASON", in one transaction; it returns how many
// moved. The counter of cause grows only when the endpoint was enabled: of
// several workers seeing the same 410, one counts it. An endpoint already
// disabled keeps its first reason (its pending deliveries still move).
func (s *Store) Disable(ctx context.Context, id string, cause Cause, reason string) (moved int64, err error) {
	return s.disable(ctx, s.db.DisableEndpoint, id, cause, reason)
}

// DisableByName is Disable by the operator, for the endpoint named name.
func (s *Store) DisableByName(ctx context.Context, name, reason string) (moved int64, err error) {
	return s.disable(ctx, s.db.DisableEndpointByName, name, Operator, reason)
}

// disable runs the store's disable by id or by name (key) after the checks.
func (s *Store) disable(ctx context.Context, by func(ctx context.Context, key, reason string) (outbox.Disabled, error),
	key string, cause Cause, reason string) (moved int64, err error) {
	if !validCause(cause) {
		return 0, fmt.Errorf("disable endpoint: unknown cause %q", cause)
	}
	if reason == "" {
		return 0, invalid("reason", "must not be empty")
	}
	d, err := by(ctx, key, reason)
	switch {
	case errors.Is(err, outbox.ErrEndpointNotFound):
		return 0, notFound(key)
	case err != nil:
		return 0, fmt.Errorf("disable endpoint %q: %w", key, err)
	}
	if d.WasEnabled {
		s.m.disabled.WithLabelValues(string(cause)).Inc()
	}
	return d.Moved, nil
}

func validCause(c Cause) bool {
	for _, k := range causes {
		if c == k {
			return true
		}
	}
	return false
}

// Remove deletes the endpoint named name, in one transaction. Its row is
// locked first: a producer or a fan-out adding a delivery for it waits (the
// foreign key's check), so the count of pending deliveries is exact. With
// pending deliveries and !force it removes nothing and returns an error
// wrapping ErrPending with their number; with force it moves them to the
// dead-letter table, with their headers ("endpoint NAME removed"), returns
// how many, and
// deletes the endpoint (its history stays until retention drops it).
func (s *Store) Remove(ctx context.Context, name string, force bool) (moved int64, err error) {
	r, err := s.db.RemoveEndpoint(ctx, name, force)
	switch {
	case errors.Is(err, outbox.ErrEndpointNotFound):
		return 0, notFound(name)
	case err != nil:
		return 0, fmt.Errorf("remove endpoint %q: %w", name, err)
	case !r.Removed:
		return 0, &pendingError{name: name, n: r.Pending}
	}
	return r.Moved, nil
}
