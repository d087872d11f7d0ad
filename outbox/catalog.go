package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/webhook"
)

// The catalog's statements (webhook_endpoints): add, list, read, change and
// enable an endpoint; its secrets (secrets.go), its disabling and removal
// (disable.go) and the janitor's (janitor.go) beside them. The rules of
// what an endpoint may be are the endpoints package's and the schema's: the
// catalog's methods return the database's refusals as they are (a
// *pgconn.PgError, for the caller to name the field), wrap no other error
// (the caller names the operation), and return an error wrapping
// ErrEndpointNotFound when no endpoint has the name or id.

// endpointColumnsSQL is what scanEndpoint reads, in its order: never a
// secret; every time through webhook_time_clamp; the end of a grace period
// only while it lasts (by the database clock).
const endpointColumnsSQL = `id::text, name, url, event_types, enabled, coalesce(disabled_reason, ''), coalesce(retry_rps, 0),
  webhook_time_clamp(created_at), webhook_time_clamp(updated_at), webhook_time_clamp(failing_since), coalesce(last_error, ''),
  coalesce(last_status, 0), webhook_time_clamp(last_error_at), webhook_time_clamp(disabled_at),
  CASE WHEN secret_previous_until > now() THEN webhook_time_clamp(secret_previous_until) END, webhook_time_clamp(client_cert_not_after),
  ordering`

// scanEndpoint reads one row of endpointColumnsSQL. EventTypes is never nil.
func scanEndpoint(row pgx.Row) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	err := row.Scan(&e.ID, &e.Name, &e.URL, &e.EventTypes, &e.Enabled, &e.DisabledReason, &e.RetryRPS,
		&e.CreatedAt, &e.UpdatedAt, &e.FailingSince, &e.LastError, &e.LastStatus, &e.LastErrorAt, &e.DisabledAt, &e.PreviousSecretUntil,
		&e.ClientCertNotAfter, &e.Ordering)
	if e.EventTypes == nil {
		e.EventTypes = []string{}
	}
	return e, err
}

// endpointRow runs a statement returning one endpoint: pgx.ErrNoRows
// becomes ErrEndpointNotFound with key.
func endpointRow(row pgx.Row, key string) (webhook.Endpoint, error) {
	e, err := scanEndpoint(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.Endpoint{}, fmt.Errorf("%w %q", ErrEndpointNotFound, key)
	}
	return e, err
}

// addEndpointSQL inserts an endpoint, enabled, under @id (NULL: a new
// uuid); a @retry_rps of 0 stores no override; a NULL @client_cert none;
// an empty @ordering the default ('move-on').
// The table's constraints and trigger check every value (a taken name is a
// unique violation, 23505).
const addEndpointSQL = `INSERT INTO webhook_endpoints (id, name, url, secret, event_types, retry_rps, client_cert, client_key, client_cert_not_after,
  ordering)
VALUES (coalesce(@id::uuid, gen_random_uuid()), @name, @url, @secret, @event_types, nullif(@retry_rps, 0),
  @client_cert, @client_key, @client_cert_not_after, coalesce(nullif(@ordering::text, ''), 'move-on')) RETURNING ` + endpointColumnsSQL

// EndpointFields are the values of a new endpoint.
type EndpointFields struct {
	// ID is the new endpoint's uuid text, chosen by the caller so that its
	// secret can be sealed bound to it; "": a new one.
	ID     string
	Name   string
	URL    string
	Secret string // as stored: sealed (package sealed), or a plaintext
	// EventTypes subscribes it to these types; empty: every event type.
	EventTypes []string
	// RetryRPS overrides WEBHOOK_RETRY_RPS; 0: no override.
	RetryRPS int
	// Ordering is webhook.OrderingMoveOn or OrderingHold; "": the former.
	Ordering string
	// ClientCert is its client certificate for mutual TLS; nil: none.
	ClientCert *StoredCert
}

// StoredCert is a client certificate as the catalog writes it.
type StoredCert struct {
	CertPEM  string // the certificate chain, leaf first
	Key      string // its private key's PEM, sealed
	NotAfter time.Time
}

// certArgs are the client certificate's parameters: NULL for nil, and
// for an empty StoredCert "" (which an update stores as none).
func certArgs(args pgx.NamedArgs, c *StoredCert) pgx.NamedArgs {
	args["client_cert"], args["client_key"], args["client_cert_not_after"] = nil, nil, nil
	if c != nil {
		args["client_cert"], args["client_key"] = c.CertPEM, c.Key
		if !c.NotAfter.IsZero() {
			args["client_cert_not_after"] = c.NotAfter
		}
	}
	return args
}

// nullID is id, or NULL when it is "".
func nullID(id string) any {
	if id == "" {
		return nil
	}
	return id
}

// AddEndpoint inserts the endpoint f (addEndpointSQL) and returns it.
func (s *Store) AddEndpoint(ctx context.Context, f EndpointFields) (webhook.Endpoint, error) {
	events := f.EventTypes
	if events == nil {
		events = []string{}
	}
	return scanEndpoint(s.pool.QueryRow(ctx, addEndpointSQL, certArgs(pgx.NamedArgs{
		"id": nullID(f.ID), "name": f.Name, "url": f.URL, "secret": f.Secret, "event_types": events, "retry_rps": f.RetryRPS, "ordering": f.Ordering,
	}, f.ClientCert)))
}

// endpointsSQL lists every endpoint by name; endpointSQL reads the one
// named @name.
const (
	endpointsSQL = `SELECT ` + endpointColumnsSQL + ` FROM webhook_endpoints ORDER BY name`
	endpointSQL  = `SELECT ` + endpointColumnsSQL + ` FROM webhook_endpoints WHERE name = @name`
)

// Endpoints returns every endpoint, by name; none: an empty, non-nil list.
func (s *Store) Endpoints(ctx context.Context) ([]webhook.Endpoint, error) {
	rows, err := s.pool.Query(ctx, endpointsSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (webhook.Endpoint, error) { return scanEndpoint(r) })
}

// Endpoint returns the endpoint named name.
func (s *Store) Endpoint(ctx context.Context, name string) (webhook.Endpoint, error) {
	return endpointRow(s.pool.QueryRow(ctx, endpointSQL, pgx.NamedArgs{"name": name}), name)
}

// updateEndpointSQL changes the endpoint named @name: each NULL parameter
// keeps its column; a @retry_rps of 0 clears the override. A new @secret
// takes over at once and ends any grace period of an earlier rotation
// (the previous secret is erased with its end). A @client_cert replaces
// the client certificate ("": removes it). With @id, only the endpoint of
// that name and id changes (the one its new values were sealed for).
const updateEndpointSQL = `UPDATE webhook_endpoints SET
  url = coalesce(@url, url), event_types = coalesce(@event_types, event_types),
  retry_rps = CASE WHEN @retry_rps::int IS NULL THEN retry_rps ELSE nullif(@retry_rps::int, 0) END,
  secret = coalesce(@secret, secret), ordering = coalesce(@ordering, ordering),
  secret_previous = CASE WHEN @secret::text IS NULL THEN secret_previous END,
  secret_previous_until = CASE WHEN @secret::text IS NULL THEN secret_previous_until END,
  client_cert = CASE WHEN @client_cert::text IS NULL THEN client_cert ELSE nullif(@client_cert::text, '') END,
  client_key = CASE WHEN @client_cert::text IS NULL THEN client_key ELSE nullif(@client_key::text, '') END,
  client_cert_not_after = CASE WHEN @client_cert::text IS NULL THEN client_cert_not_after ELSE @client_cert_not_after::timestamptz END
WHERE name = @name AND (@id::uuid IS NULL OR id = @id::uuid) RETURNING ` + endpointColumnsSQL

// EndpointChange is a change to an endpoint: nil fields stay as they are.
type EndpointChange struct {
	URL *string
	// EventTypes: nil keeps them; empty (non-nil) subscribes to every type.
	EventTypes []string
	// RetryRPS: 0 clears the override (WEBHOOK_RETRY_RPS applies).
	RetryRPS *int
	// Secret replaces the signing secret at once, with no grace period;
	// as stored (sealed, for ID).
	Secret *string
	// ClientCert replaces the client certificate; an empty one removes
	// it; nil keeps it.
	ClientCert *StoredCert
	// ID, when not "", changes the endpoint only if name still has this
	// id; "": whichever endpoint has the name.
	ID string
	// Ordering: webhook.OrderingMoveOn or OrderingHold.
	Ordering *string
}

// UpdateEndpoint changes the endpoint named name (updateEndpointSQL) and
// returns it.
func (s *Store) UpdateEndpoint(ctx context.Context, name string, c EndpointChange) (webhook.Endpoint, error) {
	return endpointRow(s.pool.QueryRow(ctx, updateEndpointSQL, certArgs(pgx.NamedArgs{
		"name": name, "url": c.URL, "event_types": c.EventTypes, "retry_rps": c.RetryRPS, "secret": c.Secret, "id": nullID(c.ID), "ordering": c.Ordering,
	}, c.ClientCert)), name)
}

// enableEndpointSQL enables the endpoint named @name and clears its
// disabled reason and time and its run of failures (failing_since), so
// that the janitor does not disable it again at once. Its dead letters
// stay.
const enableEndpointSQL = `UPDATE webhook_endpoints
SET enabled = true, disabled_reason = NULL, disabled_at = NULL, failing_since = NULL
WHERE name = @name RETURNING ` + endpointColumnsSQL

// EnableEndpoint enables the endpoint named name (enableEndpointSQL) and
// returns it.
func (s *Store) EnableEndpoint(ctx context.Context, name string) (webhook.Endpoint, error) {
	return endpointRow(s.pool.QueryRow(ctx, enableEndpointSQL, pgx.NamedArgs{"name": name}), name)
}
