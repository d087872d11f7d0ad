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
//
// WithHeaders adds request headers to every attempt of every delivery of
// the event (e.g. a W3C traceparent):
//
//	id, err := producer.EnqueueJSON(ctx, tx, "invoice.paid", inv,
//		producer.WithHeaders(map[string]string{"traceparent": tp, "x-correlation-id": cid}))
//
// When ctx carries a valid OpenTelemetry span context (the caller's span)
// and the headers have no traceparent, Enqueue writes the trace's
// traceparent (and tracestate, if any) into the event's headers: a worker
// that traces makes each attempt's span a child of the caller's span, and
// the consumer joins the same trace.
//
// WithOrderingKey delivers the events of one key to each endpoint one at a
// time, in the order they were enqueued:
//
//	id, err := producer.EnqueueJSON(ctx, tx, "order.paid", order, producer.WithOrderingKey("order-"+order.ID))
//
// WithCatalog checks the payload against its type's JSON Schema in the
// event catalog (worker event-types), and a strict catalog's types, before
// the round trip:
//
//	cat, err := producer.LoadCatalog(ctx, pool) // once, and again when the catalog changes
//	id, err := producer.EnqueueJSON(ctx, tx, "invoice.paid", inv, producer.WithCatalog(cat))
package producer

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fluxora/webhook-worker/eventheaders"
	"github.com/fluxora/webhook-worker/outbox/insert"
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
	// ErrOrderingKeyInvalid: WithOrderingKey gave an empty key, one over
	// 255 bytes, not valid UTF-8 or with control characters.
	ErrOrderingKeyInvalid = errors.New("producer: ordering key must be 1 to 255 bytes of UTF-8 without control characters")
	// ErrHeadersInvalid: WithHeaders gave headers the rules refuse (see
	// ValidateHeaders). The error's text names the header and the rule,
	// e.g. `producer: invalid headers: "X-Fluxora-Event" may not be set:
	// x-fluxora-* headers are the worker's`.
	ErrHeadersInvalid = errors.New("producer: invalid headers")
)

// Option changes how one event is enqueued.
type Option func(*options)

type options struct {
	endpoint string
	headers  map[string]string
	key      *string
	catalog  *Catalog
}

// ToEndpoint sends the event to the endpoint of webhook_endpoints named
// name, and to no other (e.g. one tenant's endpoint). An endpoint that is
// disabled still takes the event: it is dead-lettered with the reason, and
// replayed once the endpoint is enabled again.
func ToEndpoint(name string) Option { return func(o *options) { o.endpoint = name } }

// WithOrderingKey gives the event an ordering key: each endpoint receives
// the deliveries of a key's events one at a time, in the order they were
// enqueued, the next only once the one before it was delivered or
// dead-lettered (README, "Ordered delivery"). Keys are compared byte for
// byte; an entity's id ("order-42") is the usual key.
func WithOrderingKey(key string) Option { return func(o *options) { o.key = &key } }

// WithHeaders adds extra request headers to the event, sent unchanged on
// every attempt of every delivery of it, retries, fan-out and replays
// included: e.g. "traceparent" and "x-correlation-id". Names are sent in the
// case given. Given more than once, the maps are merged (a later value wins
// for the same name). Enqueue refuses, before any round trip, headers the
// database would refuse (ValidateHeaders).
func WithHeaders(h map[string]string) Option {
	return func(o *options) {
		if len(h) == 0 {
			return
		}
		if o.headers == nil {
			o.headers = make(map[string]string, len(h))
		}
		maps.Copy(o.headers, h)
	}
}

// apply applies opts, then adds the trace of ctx to the headers
// (withTrace).
func apply(ctx context.Context, opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	o.withTrace(ctx)
	return o
}

// withTrace adds traceparent (and tracestate, when the trace has one and
// the headers do not) from the span context of ctx to the headers, when it
// is valid and the headers have no traceparent of the caller's, and when
// there is room for them under the headers' limits (eventheaders.Max,
// eventheaders.MaxBytes): the trace is never the reason an event is
// refused.
func (o *options) withTrace(ctx context.Context) {
	if ctx == nil || !trace.SpanContextFromContext(ctx).IsValid() || o.has("traceparent") {
		return
	}
	var tc headerCarrier
	propagation.TraceContext{}.Inject(ctx, &tc)
	if o.has("tracestate") {
		tc.state = ""
	}
	add := map[string]string{"traceparent": tc.parent}
	if tc.state != "" {
		add["tracestate"] = tc.state
	}
	size := 0
	for n, v := range o.headers {
		size += len(n) + len(v)
	}
	for n, v := range add {
		size += len(n) + len(v)
	}
	if tc.parent == "" || len(o.headers)+len(add) > eventheaders.Max || size > eventheaders.MaxBytes {
		return
	}
	if o.headers == nil {
		o.headers = make(map[string]string, len(add))
	}
	maps.Copy(o.headers, add)
}

// has reports whether the headers have name, in any case.
func (o *options) has(name string) bool {
	for n := range o.headers {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// headerCarrier keeps what the propagator writes.
type headerCarrier struct{ parent, state string }

func (c *headerCarrier) Get(string) string { return "" }
func (c *headerCarrier) Keys() []string    { return nil }
func (c *headerCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

// statement returns the statement and arguments for an event. The headers
// argument is NULL without headers.
func statement(eventType string, payload []byte, o options) (string, []any, error) {
	var headers any
	if len(o.headers) > 0 {
		b, err := json.Marshal(o.headers)
		if err != nil {
			return "", nil, fmt.Errorf("%w: %v", ErrHeadersInvalid, err)
		}
		headers = string(b)
	}
	var key any
	if o.key != nil {
		key = *o.key
	}
	if o.endpoint == "" {
		return insert.EventSQL, []any{eventType, string(payload), headers, key}, nil
	}
	return insert.ToEndpointSQL, []any{eventType, string(payload), headers, key, o.endpoint}, nil
}

// scanError maps a targeted insert that found no endpoint to
// ErrUnknownEndpoint, naming it, the database's refusal of the headers
// to ErrHeadersInvalid, and its refusal of a type a strict catalog does
// not list to ErrUnknownEventType.
//
// The kit imports no driver, so it knows their errors by what they share:
// no row is database/sql's ErrNoRows, which pgx's ErrNoRows wraps. A
// refusal of the headers is an error with an SQLState() method (pgx's
// *pgconn.PgError has one, through pgx and through its database/sql
// driver) answering 23514 whose text holds the message the schema raises,
// "webhook_outbox.headers: " (or "webhook_outbox.event_type: ") and the
// reason. A driver whose errors have no
// SQLState method gets the refusal as any other error, wrapped in
// "producer: enqueue: " (the database still refused the row).
func scanError(err error, o options) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w named %q", ErrUnknownEndpoint, o.endpoint)
	}
	if reason, ok := refused(err, headersMessage); ok {
		return fmt.Errorf("%w: %s", ErrHeadersInvalid, reason)
	}
	if reason, ok := refused(err, eventTypeMessage); ok && strings.HasPrefix(reason, "unknown event type") {
		return unknownType(reason)
	}
	return fmt.Errorf("producer: enqueue: %w", err)
}

// refused returns the reason of the database's refusal of a column, when
// err is one whose message starts with prefix (see scanError).
func refused(err error, prefix string) (string, bool) {
	var state interface {
		error
		SQLState() string
	}
	if !errors.As(err, &state) || state.SQLState() != checkViolation {
		return "", false
	}
	_, reason, ok := strings.Cut(state.Error(), prefix)
	return strings.TrimSuffix(reason, " (SQLSTATE "+checkViolation+")"), ok // pgx ends its text so
}

// The database's refusals of bad headers (the trigger webhook_content_valid
// raises it under the constraint name webhook_outbox_headers_valid) and of
// a type a strict catalog does not list (webhook_content_valid_type,
// webhook_outbox_event_type_known): their SQLSTATE and the start of their
// messages.
const (
	checkViolation   = "23514"
	headersMessage   = "webhook_outbox.headers: "
	eventTypeMessage = "webhook_outbox.event_type: "
)

// Row is one row of a query's result: pgx.Row, *sql.Row.
type Row interface {
	Scan(dest ...any) error
}

// Querier runs a query of one row. pgx.Tx, *pgx.Conn and *pgxpool.Pool
// satisfy Querier[pgx.Row], and Enqueue infers it: the kit itself imports
// no driver. Use a transaction: that is the point of an outbox. A
// database/sql transaction goes through EnqueueSQL.
type Querier[R Row] interface {
	QueryRow(ctx context.Context, sql string, args ...any) R
}

// Enqueue validates and inserts one event and returns its delivery id (the
// x-fluxora-delivery-id of the WEBHOOK_URL endpoint, or of the one endpoint
// of ToEndpoint).
func Enqueue[R Row](ctx context.Context, q Querier[R], eventType string, payload []byte, opts ...Option) (string, error) {
	o := apply(ctx, opts)
	if err := validate(eventType, payload, o); err != nil {
		return "", err
	}
	stmt, args, err := statement(eventType, payload, o)
	if err != nil {
		return "", err
	}
	var id string
	if err := q.QueryRow(ctx, stmt, args...).Scan(&id); err != nil {
		return "", scanError(err, o)
	}
	return id, nil
}

// EnqueueJSON marshals v and enqueues it.
func EnqueueJSON[R Row](ctx context.Context, q Querier[R], eventType string, v any, opts ...Option) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrPayloadNotJSON, err)
	}
	return Enqueue(ctx, q, eventType, b, opts...)
}

// EnqueueSQL is Enqueue for a database/sql transaction.
func EnqueueSQL(ctx context.Context, tx *sql.Tx, eventType string, payload []byte, opts ...Option) (string, error) {
	o := apply(ctx, opts)
	if err := validate(eventType, payload, o); err != nil {
		return "", err
	}
	stmt, args, err := statement(eventType, payload, o)
	if err != nil {
		return "", err
	}
	var id string
	if err := tx.QueryRowContext(ctx, stmt, args...).Scan(&id); err != nil {
		return "", scanError(err, o)
	}
	return id, nil
}

func validate(eventType string, payload []byte, o options) error {
	if err := Validate(eventType, payload); err != nil {
		return err
	}
	if o.key != nil && !validText(*o.key) {
		return ErrOrderingKeyInvalid
	}
	if err := ValidateHeaders(o.headers); err != nil {
		return err
	}
	if o.catalog != nil {
		return o.catalog.Check(eventType, payload)
	}
	return nil
}

// ValidateHeaders checks the headers of WithHeaders before any round trip,
// so that a refusal leaves the caller's transaction usable. The rules are
// the database's (webhook_content_valid, under the constraint name
// webhook_outbox_headers_valid) and the worker's
// (eventheaders.Check): names HTTP tokens, none of content-type,
// content-length, host, user-agent, x-fluxora-*, webhook-* or a hop-by-hop
// header, in any case, none twice in different cases; values valid UTF-8
// without CR, LF or other control characters; at most 16 headers and 8 KiB
// of names and values. The error wraps ErrHeadersInvalid and names the
// header, the first in the database's order (shorter names first) when
// several are refused.
func ValidateHeaders(h map[string]string) error {
	if len(h) == 0 {
		return nil
	}
	names := slices.SortedFunc(maps.Keys(h), func(a, b string) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) // jsonb's order of keys
	})
	fields := make([]eventheaders.Field, len(names))
	for i, n := range names {
		fields[i] = eventheaders.Field{Name: n, Value: h[n]}
	}
	if err := eventheaders.Check(fields); err != nil {
		return fmt.Errorf("%w: %w", ErrHeadersInvalid, err)
	}
	return nil
}

// Validate checks an event before any round trip. The payload's size is
// that of its text; PostgreSQL normalises jsonb, which never makes it longer
// than compact JSON.
func Validate(eventType string, payload []byte) error {
	if eventType == "" {
		return ErrEmptyEventType
	}
	if !validText(eventType) {
		return ErrEventTypeInvalid
	}
	if len(payload) > MaxPayloadBytes {
		return ErrPayloadTooLarge
	}
	if !json.Valid(payload) {
		return ErrPayloadNotJSON
	}
	return nil
}

// validText: not empty, at most 255 bytes of UTF-8, no control character
// (the rule of event types and ordering keys, which travel in headers).
func validText(s string) bool {
	if s == "" || len(s) > MaxEventTypeBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}
