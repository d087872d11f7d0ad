package endpoints

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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

// disableSQL is webhook_endpoint_disable: in the caller's transaction, with
// the endpoint's row already locked, so that the flag read before it is the
// one it changes.
const disableSQL = "SELECT webhook_endpoint_disable($1, $2)"

// Disable disables the endpoint with id and moves its pending deliveries
// that no worker holds under a live lease to the dead-letter table, with
// "endpoint NAME disabled: REASON", in one transaction; it returns how many
// moved. The counter of cause grows only when the endpoint was enabled: of
// several workers seeing the same 410, one counts it. An endpoint already
// disabled keeps its first reason (its pending deliveries still move).
func (s *Store) Disable(ctx context.Context, id string, cause Cause, reason string) (moved int64, err error) {
	return s.disable(ctx, "id = $1::text::uuid", id, cause, reason)
}

// DisableByName is Disable by the operator, for the endpoint named name.
func (s *Store) DisableByName(ctx context.Context, name, reason string) (moved int64, err error) {
	return s.disable(ctx, "name = $1", name, Operator, reason)
}

func (s *Store) disable(ctx context.Context, where, key string, cause Cause, reason string) (moved int64, err error) {
	if !validCause(cause) {
		return 0, fmt.Errorf("disable endpoint: unknown cause %q", cause)
	}
	if reason == "" {
		return 0, invalid("reason", "must not be empty")
	}
	var wasEnabled bool
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, "SELECT id::text, enabled FROM webhook_endpoints WHERE "+where+" FOR UPDATE", key).Scan(&id, &wasEnabled)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, disableSQL, id, reason).Scan(&moved)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows), isCode(err, "22P02"): // 22P02: not a uuid
		return 0, notFound(key)
	case err != nil:
		return 0, fmt.Errorf("disable endpoint %q: %w", key, err)
	}
	if wasEnabled {
		s.m.disabled.WithLabelValues(string(cause)).Inc()
	}
	return moved, nil
}

func validCause(c Cause) bool {
	for _, k := range causes {
		if c == k {
			return true
		}
	}
	return false
}

// removeSQL dead-letters every pending delivery of the endpoint $1 (named
// $2), those under a lease included (the endpoint is going away: a worker's
// late outcome for one is refused by the fence), in the shape of
// webhook_endpoint_disable.
const removeSQL = `WITH moved AS (
  DELETE FROM webhook_outbox WHERE NOT processed AND endpoint_id = $1
  RETURNING delivery_id, event_type, payload, attempt)
INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id)
SELECT delivery_id, event_type, payload, attempt - 1, NULL, left(format('endpoint %s removed', $2::text), 512), $1
FROM moved`

// Remove deletes the endpoint named name, in one transaction. Its row is
// locked first: a producer or a fan-out adding a delivery for it waits (the
// foreign key's check), so the count of pending deliveries is exact. With
// pending deliveries and !force it removes nothing and returns an error
// wrapping ErrPending with their number; with force it moves them to the
// dead-letter table ("endpoint NAME removed"), returns how many, and
// deletes the endpoint (its processed rows go with it).
func (s *Store) Remove(ctx context.Context, name string, force bool) (moved int64, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, "SELECT id::text FROM webhook_endpoints WHERE name = $1 FOR UPDATE", name).Scan(&id); err != nil {
			return err
		}
		var pending int64
		err := tx.QueryRow(ctx, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND endpoint_id = $1", id).Scan(&pending)
		if err != nil {
			return err
		}
		if pending > 0 && !force {
			return &pendingError{name: name, n: pending}
		}
		tag, err := tx.Exec(ctx, removeSQL, id, name)
		if err != nil {
			return err
		}
		moved = tag.RowsAffected()
		_, err = tx.Exec(ctx, "DELETE FROM webhook_endpoints WHERE id = $1", id)
		return err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, notFound(name)
	case errors.Is(err, ErrPending):
		return 0, err
	case err != nil:
		return 0, fmt.Errorf("remove endpoint %q: %w", name, err)
	}
	return moved, nil
}
