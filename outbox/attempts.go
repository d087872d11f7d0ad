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
	Attempt    int       `json:"attempt" db:"attempt"`
	StartedAt  time.Time `json:"started_at" db:"started_at"`
	DurationMS float64   `json:"duration_ms" db:"duration_ms"`
	Endpoint   string    `json:"endpoint" db:"endpoint"`       // webhook_endpoint_name
	Status     *int      `json:"status" db:"status"`           // nil: no response arrived
	ErrorClass *string   `json:"error_class" db:"error_class"` // nil: delivered
	Error      *string   `json:"error" db:"error"`
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

// One delivery's statements (queries/attempts.sql).
var (
	deliveryAttemptsSQL = rawStatement("delivery_attempts")
	deliveryStateSQL    = rawStatement("delivery_state")
)

// deliveryStateRow is a row of delivery_state.
type deliveryStateRow struct {
	State   string     `db:"state"`
	Attempt int        `db:"attempt"`
	Due     *time.Time `db:"due"`
	Reason  *string    `db:"reason"`
	FanOut  int        `db:"fanout"`
}

// Attempts reads the attempts of the delivery id (a uuid), oldest first
// (none: an empty, non-nil list), and where it is now: StateUnknown when
// no row of it is left.
func (s *Store) Attempts(ctx context.Context, id string) ([]Attempt, DeliveryState, error) {
	list, err := queryAll[Attempt](ctx, s.pool, deliveryAttemptsSQL, pgx.NamedArgs{"id": id})
	if err != nil {
		return nil, DeliveryState{}, fmt.Errorf("read attempts: %w", err)
	}
	st := DeliveryState{State: StateUnknown}
	r, err := queryOne[deliveryStateRow](ctx, s.pool, deliveryStateSQL, pgx.NamedArgs{"id": id})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return list, st, nil
	case err != nil:
		return nil, DeliveryState{}, fmt.Errorf("read delivery state: %w", err)
	}
	st.State = r.State
	switch st.State {
	case StatePending, StateInFlight:
		st.NextAttempt, st.DueAt = r.Attempt, r.Due
	case StateDeadLetter:
		if r.Reason != nil {
			st.Reason = *r.Reason
		}
	case "processed":
		// Delivered when its last attempt was; else the row is an event
		// that was fanned out (its deliveries have ids of their own).
		st.State = StateUnknown
		if len(list) > 0 && list[len(list)-1].ErrorClass == nil {
			st.State = StateDelivered
		} else if len(list) == 0 && r.FanOut > 0 {
			st.State, st.FanOut = StateFannedOut, r.FanOut
		}
	}
	return list, st, nil
}
