package producer

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxora/webhook-worker/eventtypes"
	"github.com/fluxora/webhook-worker/webhook"
)

// catalogSQL reads the event catalog in one row: strict mode, the
// catalog's version, and a JSON array of the types, each its name and its
// schema (null: any JSON). The producer kit's own read: no other package
// runs it.
const catalogSQL = `SELECT c.strict, c.version, coalesce((SELECT json_agg(json_build_object('name', t.name, 'schema', t.schema))
  FROM webhook_event_types t), '[]')::text
FROM webhook_event_catalog c`

// Errors of the event catalog; test with errors.Is.
var (
	// ErrUnknownEventType: the catalog is strict and does not list the
	// type. Its text names the type, e.g. "producer: unknown event type
	// invoice.payed: the event catalog is strict". The kit refuses it
	// before the round trip when given the catalog (WithCatalog); the
	// database refuses it in any case (the error is the same).
	ErrUnknownEventType = errors.New("producer: unknown event type")
	// ErrPayloadInvalid: the payload does not match its type's JSON Schema
	// (WithCatalog). Its text names the places and the rules, never a
	// value, e.g. "producer: invalid payload: payload does not match the
	// schema of invoice.paid: /amount: got string, want integer".
	ErrPayloadInvalid = errors.New("producer: invalid payload")
)

// Catalog is the event catalog (worker event-types) as the kit read it:
// the types' JSON Schemas, compiled, and strict mode. Load it once
// (LoadCatalog) and again when the catalog changes; it is safe for
// concurrent use. The worker checks every delivery again before its first
// attempt, so an old Catalog never lets a bad payload reach a consumer:
// it only refuses later than it could.
type Catalog struct{ c *eventtypes.Catalog }

// LoadCatalog reads the event catalog in one round trip (pgx.Tx,
// *pgxpool.Pool, …, as Enqueue takes them) and compiles its schemas.
func LoadCatalog[R Row](ctx context.Context, q Querier[R]) (*Catalog, error) {
	return scanCatalog(q.QueryRow(ctx, catalogSQL))
}

// LoadCatalogSQL is LoadCatalog for database/sql (*sql.DB, *sql.Tx,
// *sql.Conn).
func LoadCatalogSQL(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (*Catalog, error) {
	return scanCatalog(q.QueryRowContext(ctx, catalogSQL))
}

func scanCatalog(r Row) (*Catalog, error) {
	var strict bool
	var version int64
	var types string
	if err := r.Scan(&strict, &version, &types); err != nil {
		return nil, fmt.Errorf("producer: load the event catalog: %w", err)
	}
	var list []webhook.EventType
	if err := json.Unmarshal([]byte(types), &list); err != nil {
		return nil, fmt.Errorf("producer: load the event catalog: %w", err)
	}
	for i := range list {
		if string(list[i].Schema) == "null" {
			list[i].Schema = nil
		}
	}
	return &Catalog{eventtypes.New(list, strict, version)}, nil
}

// Strict reports whether the catalog refuses types it does not list.
func (c *Catalog) Strict() bool { return c.c.Strict() }

// Check applies the catalog to an event, as WithCatalog does before the
// round trip: the strict rule (ErrUnknownEventType), then the type's
// schema (ErrPayloadInvalid; a schema that does not compile, an error
// wrapping eventtypes.ErrSchemaBroken).
func (c *Catalog) Check(eventType string, payload []byte) error {
	err := c.c.Check(eventType, payload)
	var pe *eventtypes.PayloadError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, eventtypes.ErrUnknownType):
		return unknownType(err.Error())
	case errors.As(err, &pe):
		return fmt.Errorf("%w: %w", ErrPayloadInvalid, err)
	}
	return fmt.Errorf("producer: the event catalog: %w", err)
}

// unknownType is ErrUnknownEventType with the rule's text ("unknown event
// type X: …").
func unknownType(problem string) error {
	return fmt.Errorf("%w%s", ErrUnknownEventType, strings.TrimPrefix(problem, "unknown event type"))
}

// WithCatalog checks the event against c before the round trip (Check):
// a payload that does not match its type's schema, or a type a strict
// catalog does not list, is refused and the caller's transaction stays
// usable. Without it the database still refuses an unknown type of a
// strict catalog, and the worker dead-letters a payload that does not
// match its schema.
func WithCatalog(c *Catalog) Option { return func(o *options) { o.catalog = c } }
