// Package endpoints is the API over webhook_endpoints: the consumers an
// event is fanned out to, each with its own URL, secret and event types.
// It adds, lists, changes, disables (dead-lettering the pending deliveries)
// and removes endpoints, reports per-endpoint counts, and runs the janitor
// that disables an endpoint whose every attempt has failed for too long.
//
// A secret enters only through Add and Update; nothing this package returns
// holds one, and no error or log line quotes one, nor a URL.
package endpoints

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultName is the name of the WEBHOOK_URL endpoint of the environment,
// which is not in the table: Add refuses it.
const DefaultName = "default"

// Config configures a Store.
type Config struct {
	// Pool runs every statement; each holds a connection for one statement
	// or one short transaction. Required.
	Pool *pgxpool.Pool
	// Registerer receives fluxora_webhook_endpoints_disabled_total. Nil: no
	// metrics (operator commands).
	Registerer prometheus.Registerer
	// Logger receives the janitor's lines. Defaults to discarding.
	Logger *slog.Logger
	// Now is the process clock, used only for what is logged (how long an
	// endpoint had been failing); decisions use the database clock.
	// Defaults to time.Now.
	Now func() time.Time
}

// Store reads and changes webhook_endpoints.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	now  func() time.Time
	m    *metrics
}

// New returns a Store, or an error naming the missing field.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("endpoints: Pool is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{
		pool: cfg.Pool,
		log:  cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		now:  cfg.Now,
		m:    newMetrics(cfg.Registerer),
	}, nil
}

// Endpoint is one row of webhook_endpoints, without its secret.
type Endpoint struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
	// EventTypes is empty for every event type.
	EventTypes     []string `json:"event_types"`
	Enabled        bool     `json:"enabled"`
	DisabledReason string   `json:"disabled_reason,omitempty"`
	// RetryRPS overrides WEBHOOK_RETRY_RPS; 0 when it does not.
	RetryRPS  int       `json:"retry_rps,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// FailingSince is when the current run of failed attempts began; nil
	// when the last attempt succeeded (or none was made).
	FailingSince *time.Time `json:"failing_since,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	// LastStatus is the HTTP status of the last failure; 0 for none (a
	// network error, a timeout).
	LastStatus  int        `json:"last_status,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	DisabledAt  *time.Time `json:"disabled_at,omitempty"`
	// PreviousSecretUntil is when the secret a rotation replaced stops
	// signing; nil when none is in its grace period. The secrets
	// themselves are never read.
	PreviousSecretUntil *time.Time `json:"previous_secret_until,omitempty"`
}

// columns is what scan reads, in its order.
const columns = `id::text, name, url, event_types, enabled, coalesce(disabled_reason, ''), coalesce(retry_rps, 0),
  webhook_time_clamp(created_at), webhook_time_clamp(updated_at), webhook_time_clamp(failing_since), coalesce(last_error, ''),
  coalesce(last_status, 0), webhook_time_clamp(last_error_at), webhook_time_clamp(disabled_at),
  CASE WHEN secret_previous_until > now() THEN webhook_time_clamp(secret_previous_until) END`

func (e *Endpoint) fields() []any {
	return []any{&e.ID, &e.Name, &e.URL, &e.EventTypes, &e.Enabled, &e.DisabledReason, &e.RetryRPS,
		&e.CreatedAt, &e.UpdatedAt, &e.FailingSince, &e.LastError, &e.LastStatus, &e.LastErrorAt, &e.DisabledAt, &e.PreviousSecretUntil}
}

func scan(row pgx.Row) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(e.fields()...)
	if e.EventTypes == nil {
		e.EventTypes = []string{}
	}
	return e, err
}

// GenerateSecret returns a new signing secret: "whsec_" and the standard
// base64 of 32 random bytes.
func GenerateSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// Add creates an endpoint. events nil or empty subscribes it to every event
// type; retryRPS 0 leaves WEBHOOK_RETRY_RPS in force. Bad values return a
// *FieldError, a taken name ErrExists.
func (s *Store) Add(ctx context.Context, name, url string, events []string, secret string, retryRPS int) (Endpoint, error) {
	events, err := normalizeEvents(events)
	err = errors.Join(validateName(name), err, validateSecret(secret), validateRetryRPS(retryRPS))
	if err != nil {
		return Endpoint{}, firstError(err)
	}
	e, err := scan(s.pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret, event_types, retry_rps)
		VALUES ($1, $2, $3, $4, nullif($5, 0)) RETURNING `+columns, name, url, secret, events, retryRPS))
	if err != nil {
		return Endpoint{}, dbError("add endpoint", name, err)
	}
	return e, nil
}

// firstError unwraps errors.Join to its first error, so that a caller gets
// one *FieldError (the first culprit, in the order of the arguments).
func firstError(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()[0]
	}
	return err
}

// List returns every endpoint, by name.
func (s *Store) List(ctx context.Context) ([]Endpoint, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+columns+" FROM webhook_endpoints ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	return list, nil
}

// Get returns the endpoint named name, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (Endpoint, error) {
	e, err := scan(s.pool.QueryRow(ctx, "SELECT "+columns+" FROM webhook_endpoints WHERE name = $1", name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, notFound(name)
	} else if err != nil {
		return Endpoint{}, fmt.Errorf("get endpoint: %w", err)
	}
	return e, nil
}

// Update is a change to an endpoint: nil fields stay as they are.
type Update struct {
	URL *string
	// Events: a pointer to an empty slice subscribes to every event type.
	Events *[]string
	// RetryRPS: 0 clears the override (WEBHOOK_RETRY_RPS applies).
	RetryRPS *int
	// Secret replaces the signing secret at once, with no grace period
	// (and ends the grace of an earlier rotation): for a leaked secret.
	// RotateSecret keeps the old one signing for a while.
	Secret *string
}

// Update changes the endpoint named name and returns it. Bad values return
// a *FieldError, an unknown name ErrNotFound, an empty Update a
// *FieldError on "update".
func (s *Store) Update(ctx context.Context, name string, u Update) (Endpoint, error) {
	if u.URL == nil && u.Events == nil && u.RetryRPS == nil && u.Secret == nil {
		return Endpoint{}, invalid("update", "nothing to change")
	}
	// The URL rules are the database's (webhook_url_problem: the rules and
	// texts of sender.ValidateURL, tested side by side): one authority.
	var errs []error
	var events []string
	if u.Events != nil {
		var err error
		events, err = normalizeEvents(*u.Events)
		errs = append(errs, err)
	}
	if u.RetryRPS != nil {
		errs = append(errs, validateRetryRPS(*u.RetryRPS))
	}
	if u.Secret != nil {
		errs = append(errs, validateSecret(*u.Secret))
	}
	if err := errors.Join(errs...); err != nil {
		return Endpoint{}, firstError(err)
	}
	e, err := scan(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints SET
		url = coalesce($2, url), event_types = coalesce($3, event_types),
		retry_rps = CASE WHEN $4::int IS NULL THEN retry_rps ELSE nullif($4::int, 0) END,
		secret = coalesce($5, secret),
		secret_previous = CASE WHEN $5::text IS NULL THEN secret_previous END,
		secret_previous_until = CASE WHEN $5::text IS NULL THEN secret_previous_until END
		WHERE name = $1 RETURNING `+columns, name, u.URL, events, u.RetryRPS, u.Secret))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, notFound(name)
	} else if err != nil {
		return Endpoint{}, dbError("update endpoint", name, err)
	}
	return e, nil
}

// Enable enables the endpoint named name and clears its disabled reason and
// its run of failures (so that the janitor does not disable it again at
// once: its next failure starts a new run). Its dead letters stay where they
// are: `worker dlq replay --endpoint NAME` sends them again.
func (s *Store) Enable(ctx context.Context, name string) (Endpoint, error) {
	e, err := scan(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints
		SET enabled = true, disabled_reason = NULL, disabled_at = NULL, failing_since = NULL
		WHERE name = $1 RETURNING `+columns, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, notFound(name)
	} else if err != nil {
		return Endpoint{}, dbError("enable endpoint", name, err)
	}
	return e, nil
}
