package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DeadLetter is one row of webhook_dead_letter as `worker dlq list` prints
// it. The JSON names are the command's.
type DeadLetter struct {
	DeliveryID string    `json:"delivery_id"`
	Endpoint   string    `json:"endpoint"` // EndpointNameSQL
	Event      string    `json:"event_type"`
	Attempts   int       `json:"attempts"`
	LastStatus *int      `json:"last_status"` // nil: no response arrived
	LastError  string    `json:"last_error"`
	DiedAt     time.Time `json:"died_at"`
	// OrderingKey and Sequence are its place in its lane ("" and 0
	// without a key); OrderBroken says the key moved on without it, else
	// (a key under 'hold') it holds the key until replayed or purged.
	OrderingKey string `json:"ordering_key,omitempty"`
	Sequence    int64  `json:"sequence,omitempty"`
	OrderBroken bool   `json:"order_broken,omitempty"`
}

// ErrEndpointNotFound is returned, wrapped with the name, when a filter
// names an endpoint webhook_endpoints does not hold.
var ErrEndpointNotFound = errors.New("no endpoint named")

// EndpointNameSQL is the endpoint of a row d (of webhook_dead_letter or
// webhook_attempts) with e its LEFT JOIN on webhook_endpoints:
// DefaultEndpointName for the WEBHOOK_URL endpoint, "(removed)" when the
// endpoint no longer exists.
const EndpointNameSQL = `CASE WHEN d.endpoint_id IS NULL THEN '` + DefaultEndpointName + `' ELSE coalesce(e.name, '(removed)') END`

// endpointFilterSQL keeps the dead letters d of one endpoint when
// @endpoint_given: the one of id @endpoint_id, the WEBHOOK_URL one when
// that is NULL (see endpointArgs).
const endpointFilterSQL = `(NOT @endpoint_given::boolean OR d.endpoint_id IS NOT DISTINCT FROM @endpoint_id::uuid)`

// endpointIDSQL finds an endpoint's id by its name.
const endpointIDSQL = `SELECT id::text FROM webhook_endpoints WHERE name = @name`

// endpointArgs resolves an endpoint filter by name into endpointFilterSQL's
// parameters: "" keeps every endpoint, DefaultEndpointName the WEBHOOK_URL
// one; another name must be in webhook_endpoints (ErrEndpointNotFound).
func (s *Store) endpointArgs(ctx context.Context, name string) (pgx.NamedArgs, error) {
	switch name {
	case "":
		return pgx.NamedArgs{"endpoint_given": false, "endpoint_id": nil}, nil
	case DefaultEndpointName:
		return pgx.NamedArgs{"endpoint_given": true, "endpoint_id": nil}, nil
	}
	var id string
	err := s.pool.QueryRow(ctx, endpointIDSQL, pgx.NamedArgs{"name": name}).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w %q", ErrEndpointNotFound, name)
	} else if err != nil {
		return nil, fmt.Errorf("find endpoint: %w", err)
	}
	return pgx.NamedArgs{"endpoint_given": true, "endpoint_id": id}, nil
}

// DeadLettersSQL lists dead letters newest first, at most @limit: of the
// event type @event_type ("" for any), died at or after @since and before
// @until (NULL: no bound), and the endpoint (endpointFilterSQL). died_at is
// read through webhook_time_clamp.
const DeadLettersSQL = `SELECT d.delivery_id::text, ` + EndpointNameSQL + `, d.event_type, d.attempts, d.last_status, d.last_error, webhook_time_clamp(d.died_at),
  coalesce(d.ordering_key, ''), coalesce(d.ordering_seq, 0), d.order_broken
FROM webhook_dead_letter d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE (@event_type::text = '' OR d.event_type = @event_type::text) AND ` + endpointFilterSQL + `
  AND (@since::timestamptz IS NULL OR d.died_at >= @since::timestamptz)
  AND (@until::timestamptz IS NULL OR d.died_at < @until::timestamptz)
ORDER BY d.died_at DESC, d.id DESC LIMIT @limit`

// DeadLetterQuery is what DeadLetters lists.
type DeadLetterQuery struct {
	// Limit is the most dead letters, newest first (at least 1).
	Limit int
	// EventType keeps the dead letters of this event type; "": any.
	EventType string
	// Endpoint keeps those of the endpoint of this name
	// (DefaultEndpointName: the WEBHOOK_URL one); "": any.
	Endpoint string
	// Since and Until keep those that died at or after Since and before
	// Until; nil: no bound.
	Since, Until *time.Time
}

// DeadLetters lists dead letters, newest first. None: an empty, non-nil
// list.
func (s *Store) DeadLetters(ctx context.Context, q DeadLetterQuery) ([]DeadLetter, error) {
	args, err := s.endpointArgs(ctx, q.Endpoint)
	if err != nil {
		return nil, err
	}
	args["event_type"], args["limit"], args["since"], args["until"] = q.EventType, q.Limit, timeArg(q.Since), timeArg(q.Until)
	rows, err := s.pool.Query(ctx, DeadLettersSQL, args)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DeadLetter])
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return list, nil
}

// countDeadLettersBeforeSQL and PurgeDeadLettersSQL count and delete the
// dead letters that died before @before, of the endpoint
// (endpointFilterSQL).
const (
	countDeadLettersBeforeSQL = `SELECT count(*) FROM webhook_dead_letter d WHERE d.died_at < @before AND ` + endpointFilterSQL
	PurgeDeadLettersSQL       = `DELETE FROM webhook_dead_letter d WHERE d.died_at < @before AND ` + endpointFilterSQL
)

// CountDeadLettersBefore counts the dead letters PurgeDeadLetters would
// delete.
func (s *Store) CountDeadLettersBefore(ctx context.Context, before time.Time, endpoint string) (int64, error) {
	args, err := s.endpointArgs(ctx, endpoint)
	if err != nil {
		return 0, err
	}
	args["before"] = before
	var n int64
	if err := s.pool.QueryRow(ctx, countDeadLettersBeforeSQL, args).Scan(&n); err != nil {
		return 0, fmt.Errorf("count dead letters: %w", err)
	}
	return n, nil
}

// PurgeDeadLetters deletes the dead letters that died before before, of the
// endpoint of that name (DefaultEndpointName: the WEBHOOK_URL one; "":
// every endpoint's), and returns how many it deleted. Those that died at
// or after before stay.
func (s *Store) PurgeDeadLetters(ctx context.Context, before time.Time, endpoint string) (int64, error) {
	args, err := s.endpointArgs(ctx, endpoint)
	if err != nil {
		return 0, err
	}
	args["before"] = before
	tag, err := retryMoved(ctx, func() (pgconn.CommandTag, error) { return s.pool.Exec(ctx, PurgeDeadLettersSQL, args) })
	if err != nil {
		return 0, fmt.Errorf("purge dead letters: %w", err)
	}
	return tag.RowsAffected(), nil
}
