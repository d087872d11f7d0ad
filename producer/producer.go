// Package producer enqueues webhook events inside the caller's own
// transaction, so an event exists if and only if the business change that
// caused it commits.
//
//	tx, _ := pool.Begin(ctx)
//	// ... the business change ...
//	id, err := producer.EnqueueJSON(ctx, tx, "stream.updated", stream)
//	// ... tx.Commit(ctx)
//
// An event goes to every enabled endpoint subscribed to its type (and to
// the worker's WEBHOOK_URL endpoint); with ToEndpoint it goes to that one
// endpoint only:
//
//	id, err := producer.EnqueueJSON(ctx, tx, "invoice.paid", inv, producer.ToEndpoint("tenant-42"))
package producer

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Limits of the contract.
const (
	MaxEventTypeBytes = 255
	MaxPayloadBytes   = 256 << 10
)

// Validation errors; test with errors.Is.
var (
	ErrEmptyEventType   = errors.New("producer: event type must not be empty")
	ErrEventTypeInvalid = errors.New("producer: event type must be valid UTF-8, at most 255 bytes, without control characters")
	ErrPayloadTooLarge  = errors.New("producer: payload over 256 KiB")
	ErrPayloadNotJSON   = errors.New("producer: payload is not valid JSON")
	// ErrUnknownEndpoint: ToEndpoint names no endpoint of webhook_endpoints.
	ErrUnknownEndpoint = errors.New("producer: no such endpoint")
)

// Option changes how one event is enqueued.
type Option func(*options)

type options struct {
	endpoint string
}

// ToEndpoint sends the event to the endpoint of webhook_endpoints named
// name, and to no other (e.g. one tenant's endpoint). An endpoint that is
// disabled still takes the event: it is dead-lettered with the reason, and
// replayed once the endpoint is enabled again.
func ToEndpoint(name string) Option { return func(o *options) { o.endpoint = name } }

func apply(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// insert returns the statement and arguments for an event.
func insert(eventType string, payload []byte, o options) (string, []any) {
	if o.endpoint == "" {
		return insertSQL, []any{eventType, string(payload)}
	}
	return insertToSQL, []any{eventType, string(payload), o.endpoint}
}

// scanError maps a targeted insert that found no endpoint to
// ErrUnknownEndpoint, naming it.
func scanError(err error, o options) error {
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w named %q", ErrUnknownEndpoint, o.endpoint)
	}
	return fmt.Errorf("producer: enqueue: %w", err)
}

// Querier is satisfied by pgx.Tx, *pgx.Conn and *pgxpool.Pool. Use a
// transaction: that is the point of an outbox.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const insertSQL = `INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2::jsonb) RETURNING delivery_id::text`

// insertToSQL inserts nothing when no endpoint has the name.
const insertToSQL = `INSERT INTO webhook_outbox (event_type, payload, endpoint_id)
SELECT $1, $2::jsonb, id FROM webhook_endpoints WHERE name = $3 RETURNING delivery_id::text`

// Enqueue validates and inserts one event and returns its delivery id (the
// x-fluxora-delivery-id of the WEBHOOK_URL endpoint, or of the one endpoint
// of ToEndpoint).
func Enqueue(ctx context.Context, q Querier, eventType string, payload []byte, opts ...Option) (string, error) {
	if err := Validate(eventType, payload); err != nil {
		return "", err
	}
	o := apply(opts)
	stmt, args := insert(eventType, payload, o)
	var id string
	if err := q.QueryRow(ctx, stmt, args...).Scan(&id); err != nil {
		return "", scanError(err, o)
	}
	return id, nil
}

// EnqueueJSON marshals v and enqueues it.
func EnqueueJSON(ctx context.Context, q Querier, eventType string, v any, opts ...Option) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrPayloadNotJSON, err)
	}
	return Enqueue(ctx, q, eventType, b, opts...)
}

// EnqueueSQL is Enqueue for a database/sql transaction.
func EnqueueSQL(ctx context.Context, tx *sql.Tx, eventType string, payload []byte, opts ...Option) (string, error) {
	if err := Validate(eventType, payload); err != nil {
		return "", err
	}
	o := apply(opts)
	stmt, args := insert(eventType, payload, o)
	var id string
	if err := tx.QueryRowContext(ctx, stmt, args...).Scan(&id); err != nil {
		return "", scanError(err, o)
	}
	return id, nil
}

// Validate checks an event before any round trip. The payload's size is
// that of its text; PostgreSQL normalises jsonb, which never makes it longer
// than compact JSON.
func Validate(eventType string, payload []byte) error {
	if eventType == "" {
		return ErrEmptyEventType
	}
	if len(eventType) > MaxEventTypeBytes || !utf8.ValidString(eventType) {
		return ErrEventTypeInvalid
	}
	for _, r := range eventType {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ErrEventTypeInvalid
		}
	}
	if len(payload) > MaxPayloadBytes {
		return ErrPayloadTooLarge
	}
	if !json.Valid(payload) {
		return ErrPayloadNotJSON
	}
	return nil
}
