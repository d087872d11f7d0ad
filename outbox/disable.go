package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lockEndpointSQL and lockEndpointByNameSQL lock the endpoint of id @id
// (uuid text: not one is SQLSTATE 22P02) or named @name, and read whether
// it is enabled: in the disabling transaction, so that the flag read is the
// one webhook_endpoint_disable changes.
const (
	lockEndpointSQL       = `SELECT id::text, enabled FROM webhook_endpoints WHERE id = @id::text::uuid FOR UPDATE`
	lockEndpointByNameSQL = `SELECT id::text, enabled FROM webhook_endpoints WHERE name = @name FOR UPDATE`
)

// disableEndpointSQL is webhook_endpoint_disable (migration 007): it
// disables the endpoint @id with @reason (one already disabled keeps its
// first reason) and moves its pending deliveries that no worker holds under
// a live lease to the dead letter, with their headers, "endpoint NAME
// disabled: REASON"; it returns how many moved.
const disableEndpointSQL = `SELECT webhook_endpoint_disable(@id, @reason)`

// Disabled is what DisableEndpoint did.
type Disabled struct {
	// Moved is how many pending deliveries went to the dead letter.
	Moved int64
	// WasEnabled: the endpoint was enabled before (this call disabled it).
	WasEnabled bool
}

// DisableEndpoint disables the endpoint of id (uuid text) in one
// transaction: lockEndpointSQL, then disableEndpointSQL.
func (s *Store) DisableEndpoint(ctx context.Context, id, reason string) (Disabled, error) {
	return s.disableEndpoint(ctx, lockEndpointSQL, pgx.NamedArgs{"id": id}, id, reason)
}

// DisableEndpointByName is DisableEndpoint for the endpoint named name
// (lockEndpointByNameSQL).
func (s *Store) DisableEndpointByName(ctx context.Context, name, reason string) (Disabled, error) {
	return s.disableEndpoint(ctx, lockEndpointByNameSQL, pgx.NamedArgs{"name": name}, name, reason)
}

func (s *Store) disableEndpoint(ctx context.Context, lockSQL string, key pgx.NamedArgs, name, reason string) (Disabled, error) {
	var d Disabled
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, lockSQL, key).Scan(&id, &d.WasEnabled); err != nil {
			return err
		}
		return tx.QueryRow(ctx, disableEndpointSQL, pgx.NamedArgs{"id": id, "reason": reason}).Scan(&d.Moved)
	})
	var pe *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pe) && pe.Code == "22P02" { // 22P02: not a uuid
		return Disabled{}, fmt.Errorf("%w %q", ErrEndpointNotFound, name)
	}
	return d, err
}

// pendingDeliveriesSQL counts the pending deliveries of the endpoint @id,
// those under a lease included.
const pendingDeliveriesSQL = `SELECT count(*) FROM webhook_outbox WHERE NOT processed AND endpoint_id = @id`

// removeDeliveriesSQL dead-letters every pending delivery of the endpoint
// @id (named @name), those under a lease included (the endpoint is going
// away: a worker's late outcome for one is refused by the fence), with
// its event, endpoint and headers (deadLetterColumns), "endpoint NAME
// removed".
const removeDeliveriesSQL = `WITH moved AS (
  DELETE FROM webhook_outbox WHERE NOT processed AND endpoint_id = @id
  RETURNING delivery_id, event_type, payload, headers, endpoint_id, attempt, ordering_key, ordering_seq)
INSERT INTO webhook_dead_letter (` + deadLetterColumns + `)
SELECT delivery_id, event_type, payload, headers, endpoint_id, attempt - 1, NULL, left(format('endpoint %s removed', @name::text), 512),
  ordering_key, ordering_seq, ordering_key IS NOT NULL
FROM moved`

// removeEndpointSQL deletes the endpoint @id. Its pending rows would go
// with it (the foreign key's ON DELETE CASCADE; removeDeliveriesSQL has
// moved them already); its history (processed rows, attempts) stays until
// retention drops its partition (migration 013).
const removeEndpointSQL = `DELETE FROM webhook_endpoints WHERE id = @id`

// Removed is what RemoveEndpoint did.
type Removed struct {
	// Pending is how many pending deliveries the endpoint had.
	Pending int64
	// Moved is how many of them went to the dead letter: Pending, or 0
	// when the endpoint was left (not forced).
	Moved int64
	// Removed: the endpoint was deleted.
	Removed bool
}

// RemoveEndpoint deletes the endpoint named name, in one transaction. Its
// row is locked first (lockEndpointByNameSQL): a producer or a fan-out
// adding a delivery for it waits (the foreign key's check), so the count
// of pending deliveries (pendingDeliveriesSQL) is exact. With pending
// deliveries and !force it changes nothing; otherwise it dead-letters them
// (removeDeliveriesSQL) and deletes the endpoint (removeEndpointSQL).
func (s *Store) RemoveEndpoint(ctx context.Context, name string, force bool) (Removed, error) {
	var r Removed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id string
		var enabled bool
		if err := tx.QueryRow(ctx, lockEndpointByNameSQL, pgx.NamedArgs{"name": name}).Scan(&id, &enabled); err != nil {
			return err
		}
		args := pgx.NamedArgs{"id": id, "name": name}
		if err := tx.QueryRow(ctx, pendingDeliveriesSQL, args).Scan(&r.Pending); err != nil || (r.Pending > 0 && !force) {
			return err
		}
		tag, err := tx.Exec(ctx, removeDeliveriesSQL, args)
		if err != nil {
			return err
		}
		r.Moved = tag.RowsAffected()
		_, err = tx.Exec(ctx, removeEndpointSQL, args)
		r.Removed = err == nil
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Removed{}, fmt.Errorf("%w %q", ErrEndpointNotFound, name)
	} else if err != nil {
		return Removed{}, err
	}
	return r, nil
}
