package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Attempt is one row of webhook_attempts as `worker attempts` prints it.
// The JSON names are the command's.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS float64   `json:"duration_ms"`
	Endpoint   string    `json:"endpoint"`    // EndpointNameSQL
	Status     *int      `json:"status"`      // nil: no response arrived
	ErrorClass *string   `json:"error_class"` // nil: delivered
	Error      *string   `json:"error"`
}

// The states of a delivery (DeliveryState.State).
const (
	StatePending    = "pending"
	StateInFlight   = "in_flight"
	StateDelivered  = "delivered"
	StateDeadLetter = "dead_letter"
	StateFannedOut  = "fanned_out" // an event's own row, whose deliveries have ids of their own
	StateUnknown    = "unknown"    // no row left (pruned by retention), or never enqueued
)

// DeliveryState is where a delivery is now. The JSON names are those of
// `worker attempts --json`.
type DeliveryState struct {
	State       string     `json:"state"`                  // one of the State constants
	NextAttempt int        `json:"next_attempt,omitempty"` // pending, in_flight
	DueAt       *time.Time `json:"due_at,omitempty"`       // pending, in_flight
	Reason      string     `json:"reason,omitempty"`       // dead_letter: its last error
	FanOut      int        `json:"fanout,omitempty"`       // fanned_out: how many deliveries
}

// AttemptsSQL reads one delivery's history, oldest first; the endpoint is
// named as in the dead letter list (EndpointNameSQL), started_at read
// through webhook_time_clamp.
const AttemptsSQL = `SELECT d.attempt, webhook_time_clamp(d.started_at), d.duration_ms, ` + EndpointNameSQL + `, d.status, d.error_class, d.error
FROM webhook_attempts d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.delivery_id = @id::uuid ORDER BY d.started_at, d.id`

// DeliveryStateSQL finds the delivery's row: a pending one first (or a
// delivery of a fan-out in flight, which has no row until its outcome:
// migration 018; pending again when its event's lease ended), then a
// dead letter, then a processed one. The due time is read through
// webhook_time_clamp.
const DeliveryStateSQL = `SELECT state, attempt, due, reason, fanout FROM (
  SELECT CASE WHEN locked_until > now() THEN 'in_flight' ELSE 'pending' END AS state, attempt, webhook_time_clamp(created_at) AS due,
    NULL::text AS reason, 0 AS fanout, 1 AS rank
  FROM webhook_outbox WHERE delivery_id = @id::uuid AND NOT processed
  UNION ALL
  SELECT CASE WHEN o.locked_until > now() THEN 'in_flight' ELSE 'pending' END, 1, webhook_time_clamp(o.created_at), NULL, 0, 1
  FROM ` + fanOutInFlightSQL + ` AND x.delivery_id = @id::uuid
  UNION ALL
  SELECT 'dead_letter', attempts, NULL, last_error, 0, 2 FROM webhook_dead_letter WHERE delivery_id = @id::uuid
  UNION ALL
  SELECT 'processed', attempt, NULL, NULL, coalesce(fanout, 0), 3 FROM webhook_outbox WHERE delivery_id = @id::uuid AND processed
) s ORDER BY rank LIMIT 1`

// Attempts reads the attempts of the delivery id (a uuid), oldest first
// (none: an empty, non-nil list), and where it is now: StateUnknown when
// no row of it is left.
func (s *Store) Attempts(ctx context.Context, id string) ([]Attempt, DeliveryState, error) {
	rows, err := s.pool.Query(ctx, AttemptsSQL, pgx.NamedArgs{"id": id})
	if err != nil {
		return nil, DeliveryState{}, fmt.Errorf("read attempts: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Attempt])
	if err != nil {
		return nil, DeliveryState{}, fmt.Errorf("read attempts: %w", err)
	}
	st := DeliveryState{State: StateUnknown}
	var n, fanout int
	var due *time.Time
	var reason *string
	err = s.pool.QueryRow(ctx, DeliveryStateSQL, pgx.NamedArgs{"id": id}).Scan(&st.State, &n, &due, &reason, &fanout)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return list, st, nil
	case err != nil:
		return nil, DeliveryState{}, fmt.Errorf("read delivery state: %w", err)
	}
	switch st.State {
	case StatePending, StateInFlight:
		st.NextAttempt, st.DueAt = n, due
	case StateDeadLetter:
		if reason != nil {
			st.Reason = *reason
		}
	case "processed":
		// Delivered when its last attempt was; else the row is an event
		// that was fanned out (its deliveries have ids of their own).
		st.State = StateUnknown
		if len(list) > 0 && list[len(list)-1].ErrorClass == nil {
			st.State = StateDelivered
		} else if len(list) == 0 && fanout > 0 {
			st.State, st.FanOut = StateFannedOut, fanout
		}
	}
	return list, st, nil
}
