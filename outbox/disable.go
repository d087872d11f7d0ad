package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Disabling and removing an endpoint (queries/disable.sql).
var (
	lockEndpointSQL       = rawStatement("lock_endpoint")
	lockEndpointByNameSQL = rawStatement("lock_endpoint_by_name")
	disableEndpointSQL    = rawStatement("disable_endpoint")
	pendingDeliveriesSQL  = rawStatement("pending_deliveries")
	removeDeliveriesSQL   = rawStatement("remove_deliveries")
	removeEndpointSQL     = rawStatement("remove_endpoint")
)

// lockedEndpoint is a row of lock_endpoint and lock_endpoint_by_name.
type lockedEndpoint struct {
	ID      string `db:"id"`
	Enabled bool   `db:"enabled"`
}

// Disabled is what DisableEndpoint did.
type Disabled struct {
	// Moved is how many pending deliveries went to the dead letter.
	Moved int64
	// WasEnabled: the endpoint was enabled before (this call disabled it).
	WasEnabled bool
}

// DisableEndpoint disables the endpoint of id (uuid text) in one
// transaction: lock_endpoint, then disable_endpoint.
func (s *Store) DisableEndpoint(ctx context.Context, id, reason string) (Disabled, error) {
	return s.disableEndpoint(ctx, lockEndpointSQL, pgx.NamedArgs{"id": id}, id, reason)
}

// DisableEndpointByName is DisableEndpoint for the endpoint named name
// (lock_endpoint_by_name).
func (s *Store) DisableEndpointByName(ctx context.Context, name, reason string) (Disabled, error) {
	return s.disableEndpoint(ctx, lockEndpointByNameSQL, pgx.NamedArgs{"name": name}, name, reason)
}

func (s *Store) disableEndpoint(ctx context.Context, lockSQL string, key pgx.NamedArgs, name, reason string) (Disabled, error) {
	var d Disabled
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		e, err := queryOne[lockedEndpoint](ctx, tx, lockSQL, key)
		if err != nil {
			return err
		}
		d.WasEnabled = e.Enabled
		if err := s.setConsoleURL(ctx, tx); err != nil {
			return err
		}
		return tx.QueryRow(ctx, disableEndpointSQL, pgx.NamedArgs{"id": e.ID, "reason": reason}).Scan(&d.Moved)
	})
	var pe *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pe) && pe.Code == "22P02" { // 22P02: not a uuid
		return Disabled{}, fmt.Errorf("%w %q", ErrEndpointNotFound, name)
	}
	return d, err
}

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
// row is locked first (lock_endpoint_by_name): a producer or a fan-out
// adding a delivery for it waits (the foreign key's check), so the count
// of pending deliveries (pending_deliveries) is exact. With pending
// deliveries and !force it changes nothing; otherwise it dead-letters them
// (remove_deliveries) and deletes the endpoint (remove_endpoint).
func (s *Store) RemoveEndpoint(ctx context.Context, name string, force bool) (Removed, error) {
	var r Removed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		e, err := queryOne[lockedEndpoint](ctx, tx, lockEndpointByNameSQL, pgx.NamedArgs{"name": name})
		if err != nil {
			return err
		}
		args := pgx.NamedArgs{"id": e.ID, "name": name}
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
