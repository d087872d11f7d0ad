package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/webhook"
)

// The catalog (webhook_endpoints): add, list, read, change and enable an
// endpoint; its secrets (secrets.go), its disabling and removal
// (disable.go) and the janitor's (janitor.go) beside them. The rules of
// what an endpoint may be are the endpoints package's and the schema's: the
// catalog's methods return the database's refusals as they are (a
// *pgconn.PgError, for the caller to name the field), wrap no other error
// (the caller names the operation), and return an error wrapping
// ErrEndpointNotFound when no endpoint has the name or id.

// The catalog's statements (queries/catalog.sql).
var (
	addEndpointSQL    = rawStatement("add_endpoint")
	endpointsSQL      = rawStatement("endpoints")
	endpointByNameSQL = rawStatement("endpoint_by_name")
	updateEndpointSQL = rawStatement("update_endpoint")
	enableEndpointSQL = rawStatement("enable_endpoint")
)

// oneEndpoint runs a statement that returns one endpoint: none is
// ErrEndpointNotFound with key.
func (s *Store) oneEndpoint(ctx context.Context, sql string, args pgx.NamedArgs, key string) (webhook.Endpoint, error) {
	e, err := queryOne[webhook.Endpoint](ctx, s.pool, sql, args)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return webhook.Endpoint{}, fmt.Errorf("%w %q", ErrEndpointNotFound, key)
	case err != nil:
		return webhook.Endpoint{}, err
	}
	return shown(e), nil
}

// shown completes an endpoint read from webhook_endpoint_shown (migration
// 022), whose columns are webhook.Endpoint's fields by name (pgx matches a
// field without a db tag to the column of its name, whatever its case and
// underscores): EventTypes is never nil.
func shown(e webhook.Endpoint) webhook.Endpoint {
	if e.EventTypes == nil {
		e.EventTypes = []string{}
	}
	return e
}

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
	// Flow is its flow control; zero: none.
	Flow webhook.Flow
	// Filter is its payload filter, a jsonpath (migration 030); "": none.
	Filter string
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

// AddEndpoint inserts the endpoint f (add_endpoint) and returns it.
func (s *Store) AddEndpoint(ctx context.Context, f EndpointFields) (webhook.Endpoint, error) {
	events := f.EventTypes
	if events == nil {
		events = []string{}
	}
	return s.oneEndpoint(ctx, addEndpointSQL, certArgs(pgx.NamedArgs{
		"id": nullID(f.ID), "name": f.Name, "url": f.URL, "secret": f.Secret, "event_types": events, "retry_rps": f.RetryRPS, "ordering": f.Ordering,
		"rate_limit": f.Flow.Rate, "rate_period_s": int(f.Flow.Per / time.Second), "rate_burst": f.Flow.Burst, "max_in_flight": f.Flow.MaxInFlight,
		"payload_filter": f.Filter,
	}, f.ClientCert), f.Name)
}

// Endpoints returns every endpoint, by name; none: an empty, non-nil list.
func (s *Store) Endpoints(ctx context.Context) ([]webhook.Endpoint, error) {
	list, err := queryAll[webhook.Endpoint](ctx, s.pool, endpointsSQL, nil)
	if err != nil {
		return nil, err
	}
	for i := range list {
		list[i] = shown(list[i])
	}
	return list, nil
}

// Endpoint returns the endpoint named name (endpoint_by_name).
func (s *Store) Endpoint(ctx context.Context, name string) (webhook.Endpoint, error) {
	return s.oneEndpoint(ctx, endpointByNameSQL, pgx.NamedArgs{"name": name}, name)
}

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
	// RateLimit sets the rate, RateLimit requests every RatePerS seconds
	// (0 clears it); Burst its burst; MaxInFlight the most in flight (0
	// clears it).
	RateLimit, RatePerS, Burst, MaxInFlight *int
	// Filter sets its payload filter, a jsonpath ("" clears it).
	Filter *string
}

// UpdateEndpoint changes the endpoint named name (update_endpoint) and
// returns it.
func (s *Store) UpdateEndpoint(ctx context.Context, name string, c EndpointChange) (webhook.Endpoint, error) {
	return s.oneEndpoint(ctx, updateEndpointSQL, certArgs(pgx.NamedArgs{
		"name": name, "url": c.URL, "event_types": c.EventTypes, "retry_rps": c.RetryRPS, "secret": c.Secret, "id": nullID(c.ID), "ordering": c.Ordering,
		"rate_limit": c.RateLimit, "rate_period_s": c.RatePerS, "rate_burst": c.Burst, "max_in_flight": c.MaxInFlight,
		"payload_filter": c.Filter,
	}, c.ClientCert), name)
}

// EnableEndpoint enables the endpoint named name and returns it, in one
// transaction: lock_endpoint_by_name, enable_endpoint, and, when it was
// disabled, endpoint_enabled (the operator event fluxora.endpoint.enabled).
func (s *Store) EnableEndpoint(ctx context.Context, name string) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		locked, err := queryOne[lockedEndpoint](ctx, tx, lockEndpointByNameSQL, pgx.NamedArgs{"name": name})
		if err != nil {
			return err
		}
		if e, err = queryOne[webhook.Endpoint](ctx, tx, enableEndpointSQL, pgx.NamedArgs{"name": name}); err != nil || locked.Enabled {
			return err
		}
		_, err = tx.Exec(ctx, endpointEnabledSQL, pgx.NamedArgs{"id": locked.ID, "console_url": s.consoleURL})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.Endpoint{}, fmt.Errorf("%w %q", ErrEndpointNotFound, name)
	} else if err != nil {
		return webhook.Endpoint{}, err
	}
	return shown(e), nil
}
