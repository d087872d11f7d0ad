package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The dead letter list's and purge's statements (queries/dead_letters.sql).
var (
	endpointIDByNameSQL       = rawStatement("endpoint_id_by_name")
	deadLettersSQL            = rawStatement("dead_letters")
	countDeadLettersBeforeSQL = rawStatement("count_dead_letters_before")
	purgeDeadLettersSQL       = rawStatement("purge_dead_letters")
)

// DeadLetter is one row of webhook_dead_letter as `worker dlq list` prints
// it. The JSON names are the command's.
type DeadLetter struct {
	DeliveryID string    `json:"delivery_id" db:"delivery_id"`
	Endpoint   string    `json:"endpoint" db:"endpoint"` // webhook_endpoint_name
	Event      string    `json:"event_type" db:"event_type"`
	Attempts   int       `json:"attempts" db:"attempts"`
	LastStatus *int      `json:"last_status" db:"last_status"` // nil: no response arrived
	LastError  string    `json:"last_error" db:"last_error"`
	DiedAt     time.Time `json:"died_at" db:"died_at"`
	// OrderingKey and Sequence are its place in its lane ("" and 0
	// without a key); OrderBroken says the key moved on without it, else
	// (a key under 'hold') it holds the key until replayed or purged.
	OrderingKey string `json:"ordering_key,omitempty" db:"ordering_key"`
	Sequence    int64  `json:"sequence,omitempty" db:"ordering_seq"`
	OrderBroken bool   `json:"order_broken,omitempty" db:"order_broken"`
}

// ErrEndpointNotFound is returned, wrapped with the name, when a filter
// names an endpoint webhook_endpoints does not hold.
var ErrEndpointNotFound = errors.New("no endpoint named")

// endpointArgs resolves an endpoint filter by name into the parameters
// @endpoint_given and @endpoint_id of the statements that filter by
// endpoint: "" keeps every endpoint, DefaultEndpointName the WEBHOOK_URL
// one; another name must be in webhook_endpoints (ErrEndpointNotFound).
func (s *Store) endpointArgs(ctx context.Context, name string) (pgx.NamedArgs, error) {
	switch name {
	case "":
		return pgx.NamedArgs{"endpoint_given": false, "endpoint_id": nil}, nil
	case DefaultEndpointName:
		return pgx.NamedArgs{"endpoint_given": true, "endpoint_id": nil}, nil
	}
	var id string
	err := s.pool.QueryRow(ctx, endpointIDByNameSQL, pgx.NamedArgs{"name": name}).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w %q", ErrEndpointNotFound, name)
	} else if err != nil {
		return nil, fmt.Errorf("find endpoint: %w", err)
	}
	return pgx.NamedArgs{"endpoint_given": true, "endpoint_id": id}, nil
}

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

// DeadLetters lists dead letters, newest first (dead_letters). None: an
// empty, non-nil list.
func (s *Store) DeadLetters(ctx context.Context, q DeadLetterQuery) ([]DeadLetter, error) {
	args, err := s.endpointArgs(ctx, q.Endpoint)
	if err != nil {
		return nil, err
	}
	args["event_type"], args["limit"], args["since"], args["until"] = q.EventType, q.Limit, timeArg(q.Since), timeArg(q.Until)
	list, err := queryAll[DeadLetter](ctx, s.pool, deadLettersSQL, args)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return list, nil
}

// CountDeadLettersBefore counts the dead letters PurgeDeadLetters would
// delete (count_dead_letters_before).
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
// every endpoint's), and returns how many it deleted (purge_dead_letters).
// Those that died at or after before stay.
func (s *Store) PurgeDeadLetters(ctx context.Context, before time.Time, endpoint string) (int64, error) {
	args, err := s.endpointArgs(ctx, endpoint)
	if err != nil {
		return 0, err
	}
	args["before"] = before
	tag, err := retryMoved(ctx, func() (pgconn.CommandTag, error) { return s.pool.Exec(ctx, purgeDeadLettersSQL, args) })
	if err != nil {
		return 0, fmt.Errorf("purge dead letters: %w", err)
	}
	return tag.RowsAffected(), nil
}
