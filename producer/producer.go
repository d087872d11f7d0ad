// Package producer enqueues webhook events inside the caller's own
// transaction, so an event exists if and only if the business change that
// caused it commits.
//
//	tx, _ := pool.Begin(ctx)
//	// ... the business change ...
//	id, err := producer.EnqueueJSON(ctx, tx, "stream.updated", stream)
//	// ... tx.Commit(ctx)
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
)

// Querier is satisfied by pgx.Tx, *pgx.Conn and *pgxpool.Pool. Use a
// transaction: that is the point of an outbox.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const insertSQL = `INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2::jsonb) RETURNING delivery_id::text`

// Enqueue validates and inserts one event and returns its delivery id.
func Enqueue(ctx context.Context, q Querier, eventType string, payload []byte) (string, error) {
	if err := Validate(eventType, payload); err != nil {
		return "", err
	}
	var id string
	if err := q.QueryRow(ctx, insertSQL, eventType, string(payload)).Scan(&id); err != nil {
		return "", fmt.Errorf("producer: enqueue: %w", err)
	}
	return id, nil
}

// EnqueueJSON marshals v and enqueues it.
func EnqueueJSON(ctx context.Context, q Querier, eventType string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrPayloadNotJSON, err)
	}
	return Enqueue(ctx, q, eventType, b)
}

// EnqueueSQL is Enqueue for a database/sql transaction.
func EnqueueSQL(ctx context.Context, tx *sql.Tx, eventType string, payload []byte) (string, error) {
	if err := Validate(eventType, payload); err != nil {
		return "", err
	}
	var id string
	if err := tx.QueryRowContext(ctx, insertSQL, eventType, string(payload)).Scan(&id); err != nil {
		return "", fmt.Errorf("producer: enqueue: %w", err)
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
