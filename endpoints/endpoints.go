// Package endpoints is the API over webhook_endpoints: the consumers an
// event is fanned out to, each with its own URL, secret and event types.
// It adds, lists, changes, disables (dead-lettering the pending deliveries)
// and removes endpoints, reports per-endpoint counts, and runs the janitor
// that disables an endpoint whose every attempt has failed for too long
// (and samples the endpoints' backlog once a minute for the console).
// The rules are this package's (validation, errors, metrics, logs); the
// statements are the store's (package outbox: catalog.go, secrets.go,
// disable.go, janitor.go).
//
// A secret enters only through Add and Update; nothing this package returns
// holds one (but RotateKey the HMAC secret it made, for its consumer), and
// no error or log line quotes one, nor a URL. A secret is an HMAC secret
// or an ed25519 private key ("whsk_…", package signingkey): of the latter,
// the public key its consumers verify with is shown (Signing).
package endpoints

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// DefaultName is the name of the WEBHOOK_URL endpoint of the environment,
// which is not in the table: Add refuses it.
const DefaultName = "default"

// Config configures a Store.
type Config struct {
	// Pool runs every statement; each holds a connection for one statement
	// or one short transaction. Required.
	Pool *pgxpool.Pool
	// Registerer receives fluxora_webhook_endpoints_disabled_total,
	// fluxora_webhook_endpoint_client_cert_days_left and
	// fluxora_webhook_endpoint_secret_unreadable. Nil: no metrics
	// (operator commands).
	Registerer prometheus.Registerer
	// Logger receives the janitor's lines, the client certificates' and
	// the unreadable secrets'. Defaults to discarding.
	Logger *slog.Logger
	// Now is the process clock, used for what is logged (how long an
	// endpoint had been failing), the client certificates' days left and
	// how often an unreadable secret is marked again; the janitor's
	// decisions use the database clock. Defaults to time.Now.
	Now func() time.Time
	// Sealer seals every secret and client key the store writes, and
	// opens the client keys LoadClientCerts reads. Nil: the methods that
	// would store one return ErrNoSealer, and no client certificate loads.
	Sealer Sealer
	// ConsoleURL is the console's base URL (WEBHOOK_CONSOLE_URL) the
	// operator events written through this Store carry as console_url
	// (docs/operator-events.md). "": none.
	ConsoleURL string
}

// Store reads and changes webhook_endpoints, through the store's
// statements (package outbox).
type Store struct {
	db     *outbox.Store
	sealer Sealer // nil: none
	log    *slog.Logger
	now    func() time.Time
	m      *metrics
	certs  clientCerts // the worker's: LoadClientCerts
	marks  secretMarks // the worker's: SecretUnreadable
}

// New returns a Store, or an error naming the missing field.
func New(cfg Config) (*Store, error) {
	if cfg.Pool == nil {
		return nil, errors.New("endpoints: Pool is required")
	}
	db, err := outbox.New(cfg.Pool)
	if err != nil {
		return nil, err
	}
	db.SetConsoleURL(cfg.ConsoleURL)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{
		db:     db,
		sealer: cfg.Sealer,
		log:    cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		now:    cfg.Now,
		m:      newMetrics(cfg.Registerer),
		certs:  clientCerts{by: map[string]loadedCert{}},
		marks:  secretMarks{marked: map[string]time.Time{}},
	}, nil
}

// Endpoint is one row of webhook_endpoints, without its secret
// (webhook.Endpoint).
type Endpoint = webhook.Endpoint

// Add creates an endpoint (Create, without a client certificate).
func (s *Store) Add(ctx context.Context, name, url string, events []string, secret string, retryRPS int) (Endpoint, error) {
	return s.Create(ctx, NewEndpoint{Name: name, URL: url, Events: events, Secret: secret, RetryRPS: retryRPS})
}

// NewEndpoint is a new endpoint's values.
type NewEndpoint struct {
	Name, URL string
	// Events nil or empty subscribes it to every event type.
	Events []string
	// Secret is its signing secret, stored sealed: an HMAC secret or an
	// ed25519 private key (whsk_…).
	Secret string
	// RetryRPS 0 leaves WEBHOOK_RETRY_RPS in force.
	RetryRPS int
	// ClientCert is its client certificate for mutual TLS (key stored
	// sealed); nil: none.
	ClientCert *ClientCert
	// Ordering is what a dead-lettered delivery with an ordering key does
	// to its key: webhook.OrderingMoveOn ("" too, the default) or
	// OrderingHold.
	Ordering string
	// Flow is its flow control across every worker; zero: none.
	Flow webhook.Flow
	// Filter is its payload filter, a PostgreSQL jsonpath: it takes an
	// event of its types only when the filter finds something in the
	// payload; "": every event of its types.
	Filter string
}

// Create creates an endpoint, its secret and client key sealed for its id
// (chosen here). Bad values return a *FieldError, a taken name ErrExists,
// a Store without a Sealer ErrNoSealer.
func (s *Store) Create(ctx context.Context, n NewEndpoint) (Endpoint, error) {
	events, err := normalizeEvents(n.Events)
	err = errors.Join(validateName(n.Name), err, validateSecret(n.Secret), validateRetryRPS(n.RetryRPS),
		validateOrdering(n.Ordering, true), validateFlow(n.Flow))
	if err != nil {
		return Endpoint{}, firstError(err)
	}
	if err := s.checkCatalog(ctx, events); err != nil {
		return Endpoint{}, err
	}
	if _, err := s.checkFilter(ctx, n.Filter); err != nil {
		return Endpoint{}, err
	}
	id, err := newID()
	if err != nil {
		return Endpoint{}, err
	}
	secret, err := s.sealSecret(id, n.Secret)
	if err != nil {
		return Endpoint{}, err
	}
	cert, err := s.storedCert(id, n.ClientCert)
	if err != nil {
		return Endpoint{}, err
	}
	e, err := s.db.AddEndpoint(ctx, outbox.EndpointFields{ID: id, Name: n.Name, URL: n.URL, Secret: secret, EventTypes: events,
		RetryRPS: n.RetryRPS, ClientCert: cert, Ordering: n.Ordering, Flow: n.Flow, Filter: strings.TrimSpace(n.Filter)})
	if err != nil {
		return Endpoint{}, dbError("add endpoint", n.Name, err)
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
	list, err := s.db.Endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	return list, nil
}

// Get returns the endpoint named name, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (Endpoint, error) {
	e, err := s.db.Endpoint(ctx, name)
	if errors.Is(err, outbox.ErrEndpointNotFound) {
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
	// ClientCert replaces its client certificate; an empty one removes
	// it.
	ClientCert *ClientCert
	// Ordering: webhook.OrderingMoveOn or OrderingHold.
	Ordering *string
	// Rate sets the rate, Rate requests every Per (a Rate of 0 clears
	// it); Burst its burst; MaxInFlight the most requests in flight (0
	// clears it). Only those fields of Rate are read.
	Rate        *webhook.Flow
	Burst       *int
	MaxInFlight *int
	// Filter sets its payload filter, a jsonpath ("" removes it).
	Filter *string
}

// Update changes the endpoint named name and returns it. Bad values return
// a *FieldError, an unknown name ErrNotFound, an empty Update a
// *FieldError on "update".
func (s *Store) Update(ctx context.Context, name string, u Update) (Endpoint, error) {
	if u.URL == nil && u.Events == nil && u.RetryRPS == nil && u.Secret == nil && u.ClientCert == nil && u.Ordering == nil &&
		u.Rate == nil && u.Burst == nil && u.MaxInFlight == nil && u.Filter == nil {
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
	if u.Ordering != nil {
		errs = append(errs, validateOrdering(*u.Ordering, false))
	}
	var f webhook.Flow
	if u.Rate != nil {
		f.Rate, f.Per = u.Rate.Rate, u.Rate.Per
	}
	if u.Burst != nil {
		f.Burst = *u.Burst
	}
	if u.MaxInFlight != nil {
		f.MaxInFlight = *u.MaxInFlight
	}
	errs = append(errs, validateFlow(f))
	if err := errors.Join(errs...); err != nil {
		return Endpoint{}, firstError(err)
	}
	if err := s.checkCatalog(ctx, events); err != nil {
		return Endpoint{}, err
	}
	if u.Filter != nil {
		if _, err := s.checkFilter(ctx, *u.Filter); err != nil {
			return Endpoint{}, err
		}
		trimmed := strings.TrimSpace(*u.Filter)
		u.Filter = &trimmed
	}
	change, err := s.sealChange(ctx, name, u)
	if err != nil {
		return Endpoint{}, err
	}
	change.URL, change.EventTypes, change.RetryRPS, change.Ordering = u.URL, events, u.RetryRPS, u.Ordering
	change.Burst, change.MaxInFlight, change.Filter = u.Burst, u.MaxInFlight, u.Filter
	if u.Rate != nil {
		perS := int(u.Rate.Per / time.Second)
		change.RateLimit, change.RatePerS = &u.Rate.Rate, &perS
	}
	e, err := s.db.UpdateEndpoint(ctx, name, change)
	if errors.Is(err, outbox.ErrEndpointNotFound) {
		return Endpoint{}, notFound(name)
	} else if err != nil {
		return Endpoint{}, dbError("update endpoint", name, err)
	}
	return e, nil
}

// sealChange seals u's secret and client key, if any, for the id of the
// endpoint named name: the change then applies only to that endpoint
// (outbox.EndpointChange.ID), not to one that took the name meanwhile.
func (s *Store) sealChange(ctx context.Context, name string, u Update) (outbox.EndpointChange, error) {
	var c outbox.EndpointChange
	if u.Secret == nil && u.ClientCert == nil {
		return c, nil
	}
	e, err := s.Get(ctx, name)
	if err != nil {
		return c, err
	}
	c.ID = e.ID
	if u.Secret != nil {
		secret, err := s.sealSecret(e.ID, *u.Secret)
		if err != nil {
			return c, err
		}
		c.Secret = &secret
	}
	c.ClientCert, err = s.storedCert(e.ID, u.ClientCert)
	return c, err
}

// Enable enables the endpoint named name and clears its disabled reason and
// its run of failures (so that the janitor does not disable it again at
// once: its next failure starts a new run). Its dead letters stay where they
// are: `worker dlq replay --endpoint NAME` sends them again.
func (s *Store) Enable(ctx context.Context, name string) (Endpoint, error) {
	e, err := s.db.EnableEndpoint(ctx, name)
	if errors.Is(err, outbox.ErrEndpointNotFound) {
		return Endpoint{}, notFound(name)
	} else if err != nil {
		return Endpoint{}, dbError("enable endpoint", name, err)
	}
	return e, nil
}
