// Package console is the operator console of `worker console`: a few
// server-rendered pages (html/template, a little JavaScript, everything
// embedded) and a JSON API under /api/ over the same reads and actions.
//
// Every page and API call needs the console's token, as a bearer header or
// through the session cookie its login form sets; every action is a POST,
// and a POST with the session cookie needs the session's CSRF token. The
// console reads and moves rows only through Store and Endpoints, which
// cmd/worker satisfies with the outbox and endpoints packages.
package console

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// Defaults of Config.
const (
	// SessionTTLDefault is how long a login lasts.
	SessionTTLDefault = 12 * time.Hour
	// TokenMinLength is the shortest token New accepts, in bytes.
	TokenMinLength = 32
	// WindowDefault is the span of the overview's figures (an hour).
	WindowDefault = time.Hour
	// AttemptsLimitDefault is how many attempts an endpoint page lists.
	AttemptsLimitDefault = 50
	// DeadLettersLimitDefault is how many dead letters a page lists.
	DeadLettersLimitDefault = 200
	// PreviewDefault is how much of a payload the delivery page shows, in
	// characters.
	PreviewDefault = 2048
)

// Store is what the console reads and moves; *outbox.Store satisfies it.
type Store interface {
	QueueStatus(ctx context.Context) (outbox.QueueStatus, error)
	EndpointStatus(ctx context.Context, env bool, only string) ([]outbox.EndpointStatus, error)
	EndpointHours(ctx context.Context, since time.Time) (map[string]outbox.EndpointHour, error)
	EndpointFlows(ctx context.Context) (map[string]outbox.EndpointFlow, error)
	EndpointFilters(ctx context.Context) (map[string]string, error)
	EndpointAttempts(ctx context.Context, name string, since time.Time, limit int) ([]outbox.DeliveryAttempt, error)
	SearchAttempts(ctx context.Context, id string) ([]outbox.DeliveryAttempt, error)
	DeliveryRow(ctx context.Context, id string, from, to time.Time, preview int) (outbox.DeliveryRow, bool, error)
	DeadLetters(ctx context.Context, q outbox.DeadLetterQuery) ([]outbox.DeadLetter, error)
	Chart(ctx context.Context, q outbox.ChartQuery) ([]outbox.ChartBucket, error)
	Replay(ctx context.Context, f outbox.ReplayFilter) (outbox.Replayed, error)
	PurgeDeadLetters(ctx context.Context, before time.Time, endpoint string) (int64, error)
	EventCatalogState(ctx context.Context) (outbox.EventCatalogState, error)
	EventTypes(ctx context.Context) ([]webhook.EventType, error)
}

// Endpoints changes the endpoint catalog. An unknown name is an error
// wrapping outbox.ErrEndpointNotFound; a value the catalog refuses, one
// wrapping ErrInvalid.
type Endpoints interface {
	// Disable disables the endpoint and returns how many pending
	// deliveries were dead-lettered.
	Disable(ctx context.Context, name, reason string) (moved int64, err error)
	Enable(ctx context.Context, name string) error
	// RotateSecret generates a new secret, makes it sign from now on, keeps
	// the old one signing for grace, and returns the new one.
	RotateSecret(ctx context.Context, name string, grace time.Duration) (secret string, err error)
}

// ErrInvalid marks a value a store refused (the message says which).
var ErrInvalid = errors.New("invalid")

// Config configures the console. Store, Endpoints and Token are required.
type Config struct {
	Store     Store
	Endpoints Endpoints
	// Token is the secret every request must present (at least
	// TokenMinLength bytes). It is never logged.
	Token []byte
	// DefaultEndpoint: the WEBHOOK_URL endpoint is configured (the
	// overview lists it even without rows).
	DefaultEndpoint bool
	// Breakers reads the endpoints' circuit breakers (REDIS_URL); nil:
	// none shown. DefaultURL is the WEBHOOK_URL endpoint's consumer, whose
	// breaker it is.
	Breakers   Breakers
	DefaultURL string
	// RequestHeaders returns the headers of the request the worker sends
	// for r, its signature headers empty: cmd/worker passes the sender's
	// own (sender.Header), so that the delivery page shows what the sender
	// builds, not a list of its own. The console masks the secret values.
	// Nil: the delivery page shows no request.
	RequestHeaders func(r Request) http.Header
	// Hosts are the names (or name:port) the console answers to besides
	// the address a request came to and, on loopback, localhost; a request
	// for any other Host gets 421 (it may come from a page whose name was
	// made to resolve here). A name without a port matches every port.
	Hosts []string
	// SecureCookies sets Secure on the session cookie even over plain
	// HTTP (behind a TLS proxy); requests over TLS get it anyway.
	SecureCookies bool
	// SessionTTL is how long a login lasts; defaults to SessionTTLDefault.
	SessionTTL time.Duration
	// Window is the span of the figures (success rate, p50/p99, recent
	// attempts); defaults to WindowDefault, an hour.
	Window time.Duration
	// Now is the clock; defaults to time.Now.
	Now func() time.Time
	// Logger gets errors (never a token, secret or payload); defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Server serves the console.
type Server struct {
	cfg      Config
	sessions *sessions
	limiter  *limiter
	pages    *pages
	mux      *http.ServeMux
}

// New checks cfg, applies its defaults and returns the console.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil || cfg.Endpoints == nil:
		return nil, errors.New("console: Store and Endpoints are required")
	case len(cfg.Token) < TokenMinLength:
		return nil, errors.New("console: Token must be at least 32 bytes (TokenMinLength)")
	}
	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, SessionTTLDefault)
	cfg.Window = cmp.Or(cfg.Window, WindowDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, sessions: newSessions(cfg.Now, cfg.SessionTTL), limiter: newLimiter(cfg.Now), pages: p}
	s.mux = s.routes()
	return s, nil
}

// ServeHTTP serves every request with the console's security headers,
// once guard has let it through.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if s.guard(w, r) {
		s.mux.ServeHTTP(w, r)
	}
}

// routes maps every path: GETs read, POSTs act; all but the login page and
// the static files need the token (authed).
func (s *Server) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("GET /static/", staticFiles())
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.authed(s.logout))
	for _, prefix := range []string{"", "/api"} {
		m.HandleFunc("POST "+prefix+"/endpoints/{name}/disable", s.authed(s.disable))
		m.HandleFunc("POST "+prefix+"/endpoints/{name}/enable", s.authed(s.enable))
		m.HandleFunc("POST "+prefix+"/endpoints/{name}/rotate-secret", s.authed(s.rotate))
		m.HandleFunc("POST "+prefix+"/endpoints/{name}/replay", s.authed(s.replayEndpoint))
		m.HandleFunc("POST "+prefix+"/dead-letters/replay", s.authed(s.replayDeadLetters))
		m.HandleFunc("POST "+prefix+"/dead-letters/purge", s.authed(s.purge))
	}
	m.HandleFunc("GET /{$}", s.authed(s.overviewHandler))
	m.HandleFunc("GET /api/overview", s.authed(s.overviewHandler))
	m.HandleFunc("GET /api/endpoints", s.authed(s.apiEndpoints))
	m.HandleFunc("GET /api/charts", s.authed(s.chartsHandler))
	for _, prefix := range []string{"", "/api"} {
		m.HandleFunc("GET "+prefix+"/endpoints/{name}", s.authed(s.endpointHandler))
		m.HandleFunc("GET "+prefix+"/dead-letters", s.authed(s.deadLettersHandler))
	}
	m.HandleFunc("GET /event-types", s.authed(s.eventTypesHandler))
	m.HandleFunc("GET /api/event-types", s.authed(s.eventTypesHandler))
	m.HandleFunc("GET /deliveries", s.authed(s.deliveryHandler))
	m.HandleFunc("GET /api/deliveries/{id}", s.authed(s.deliveryHandler))
	return m
}
