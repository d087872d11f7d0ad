package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The console's reads (queries/console.sql): the last hour's figures of
// every endpoint, an endpoint's recent attempts, and a delivery's attempts
// and row found by its delivery id or its event's.
var (
	endpointHoursSQL    = rawStatement("endpoint_hours")
	endpointAttemptsSQL = rawStatement("endpoint_attempts")
	searchAttemptsSQL   = rawStatement("search_attempts")
	deliveryRowSQL      = rawStatement("delivery_row")
)

// EndpointHour is one endpoint's attempts of the last hour.
type EndpointHour struct {
	Name      string   `json:"name" db:"name"` // webhook_endpoint_name
	Attempts  int64    `json:"attempts" db:"attempts"`
	Succeeded int64    `json:"succeeded" db:"succeeded"`
	P50MS     *float64 `json:"p50_ms" db:"p50_ms"` // nil: no attempt
	P99MS     *float64 `json:"p99_ms" db:"p99_ms"`
}

// EndpointHours reads every endpoint's attempts since since
// (endpoint_hours), by endpoint name; an endpoint with none is absent.
func (s *Store) EndpointHours(ctx context.Context, since time.Time) (map[string]EndpointHour, error) {
	list, err := queryAll[EndpointHour](ctx, s.pool, endpointHoursSQL, pgx.NamedArgs{"since": since})
	if err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	out := make(map[string]EndpointHour, len(list))
	for _, h := range list {
		out[h.Name] = h
	}
	return out, nil
}

// DeliveryAttempt is an attempt with its delivery id.
type DeliveryAttempt struct {
	DeliveryID string `json:"delivery_id" db:"delivery_id"`
	Attempt
}

// EndpointAttempts lists the attempts of the endpoint named name
// (DefaultEndpointName: the WEBHOOK_URL one) that started at or after
// since, newest first, at most limit (endpoint_attempts).
func (s *Store) EndpointAttempts(ctx context.Context, name string, since time.Time, limit int) ([]DeliveryAttempt, error) {
	args, err := s.endpointArgs(ctx, name)
	if err != nil {
		return nil, err
	}
	args["since"], args["limit"] = since, limit
	list, err := queryAll[DeliveryAttempt](ctx, s.pool, endpointAttemptsSQL, args)
	if err != nil {
		return nil, fmt.Errorf("endpoint attempts: %w", err)
	}
	return list, nil
}

// SearchAttempts lists the attempts of the delivery id, or of the
// deliveries of the event id (search_attempts).
func (s *Store) SearchAttempts(ctx context.Context, id string) ([]DeliveryAttempt, error) {
	list, err := queryAll[DeliveryAttempt](ctx, s.pool, searchAttemptsSQL, pgx.NamedArgs{"id": id})
	if err != nil {
		return nil, fmt.Errorf("search attempts: %w", err)
	}
	return list, nil
}

// DeliveryRow is what a delivery (or an event) carries, as the console
// shows it: never more than a preview of the payload.
type DeliveryRow struct {
	Where          string            `json:"where" db:"place"` // StateDeadLetter, StatePending, StateInFlight or "processed"
	EventType      string            `json:"event_type" db:"event_type"`
	PayloadPreview string            `json:"payload_preview" db:"payload_preview"`
	PayloadBytes   int               `json:"payload_bytes" db:"payload_bytes"`
	Headers        map[string]string `json:"headers" db:"headers"` // the event's own headers
	// OrderingKey and Sequence are the row's ordering_key and
	// ordering_seq ("" and 0 for none; a fan-out in flight has no
	// sequence yet).
	OrderingKey string `json:"ordering_key,omitempty" db:"ordering_key"`
	Sequence    int64  `json:"sequence,omitempty" db:"sequence"`
}

// DeliveryRow finds the row of the delivery or event id (delivery_row),
// processed, if it was, between from and to, its payload cut to preview
// characters; ok is false when there is none.
func (s *Store) DeliveryRow(ctx context.Context, id string, from, to time.Time, preview int) (DeliveryRow, bool, error) {
	r, err := queryOne[DeliveryRow](ctx, s.pool, deliveryRowSQL, pgx.NamedArgs{"id": id, "from": from, "to": to, "preview": preview})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return DeliveryRow{}, false, nil
	case err != nil:
		return DeliveryRow{}, false, fmt.Errorf("read delivery: %w", err)
	}
	return r, true, nil
}
