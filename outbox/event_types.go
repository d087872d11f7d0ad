package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/webhook"
)

// The event catalog (webhook_event_types, migration 029): its types and
// its state. As for the endpoint catalog, the database's refusals are
// returned as they are (a *pgconn.PgError), and a type that is not there
// as an error wrapping ErrEventTypeNotFound.

// The event catalog's statements (queries/event_types.sql).
var (
	eventTypesSQL            = rawStatement("event_types")
	eventTypeByNameSQL       = rawStatement("event_type_by_name")
	addEventTypeSQL          = rawStatement("add_event_type")
	updateEventTypeSQL       = rawStatement("update_event_type")
	removeEventTypeSQL       = rawStatement("remove_event_type")
	eventCatalogStateSQL     = rawStatement("event_catalog_state")
	setEventCatalogStrictSQL = rawStatement("set_event_catalog_strict")
	eventCatalogSummarySQL   = rawStatement("event_catalog_summary")
	eventTypeNamesSQL        = rawStatement("event_type_names")
)

// ErrEventTypeNotFound is returned, wrapped with the name, when the
// catalog has no type of that name.
var ErrEventTypeNotFound = errors.New("no event type named")

// EventCatalogState is the catalog's one row of state.
type EventCatalogState struct {
	Strict bool `db:"strict"`
	// Version is bumped by every change of the types.
	Version int64 `db:"version"`
}

// EventCatalogSummary is the catalog at a glance (worker status).
type EventCatalogSummary struct {
	Strict  bool  `db:"strict" json:"strict"`
	Version int64 `db:"version" json:"version"`
	Types   int64 `db:"types" json:"types"`
}

// EventCatalogSummary reads strict mode, the version and the number of
// types.
func (s *Store) EventCatalogSummary(ctx context.Context) (EventCatalogSummary, error) {
	return queryOne[EventCatalogSummary](ctx, s.pool, eventCatalogSummarySQL, nil)
}

// EventTypes returns every type of the catalog, by name; none: an empty,
// non-nil list.
func (s *Store) EventTypes(ctx context.Context) ([]webhook.EventType, error) {
	return queryAll[webhook.EventType](ctx, s.pool, eventTypesSQL, nil)
}

// EventTypeNames returns the names of the catalog's types, in no order.
func (s *Store) EventTypeNames(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, eventTypeNamesSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// EventType returns the type named name.
func (s *Store) EventType(ctx context.Context, name string) (webhook.EventType, error) {
	return s.oneEventType(ctx, eventTypeByNameSQL, pgx.NamedArgs{"name": name}, name)
}

// AddEventType adds t and returns it as stored.
func (s *Store) AddEventType(ctx context.Context, t webhook.EventType) (webhook.EventType, error) {
	return s.oneEventType(ctx, addEventTypeSQL, eventTypeArgs(t), t.Name)
}

// UpdateEventType writes every field of t to the type of its name and
// returns it as stored.
func (s *Store) UpdateEventType(ctx context.Context, t webhook.EventType) (webhook.EventType, error) {
	return s.oneEventType(ctx, updateEventTypeSQL, eventTypeArgs(t), t.Name)
}

// RemoveEventType removes the type named name and returns it.
func (s *Store) RemoveEventType(ctx context.Context, name string) (webhook.EventType, error) {
	return s.oneEventType(ctx, removeEventTypeSQL, pgx.NamedArgs{"name": name}, name)
}

// EventCatalogState reads strict mode and the catalog's version.
func (s *Store) EventCatalogState(ctx context.Context) (EventCatalogState, error) {
	return queryOne[EventCatalogState](ctx, s.pool, eventCatalogStateSQL, nil)
}

// SetEventCatalogStrict turns strict mode on or off and returns the state.
func (s *Store) SetEventCatalogStrict(ctx context.Context, strict bool) (EventCatalogState, error) {
	return queryOne[EventCatalogState](ctx, s.pool, setEventCatalogStrictSQL, pgx.NamedArgs{"strict": strict})
}

// oneEventType runs a statement that returns one type: none is
// ErrEventTypeNotFound with name.
func (s *Store) oneEventType(ctx context.Context, sql string, args pgx.NamedArgs, name string) (webhook.EventType, error) {
	t, err := queryOne[webhook.EventType](ctx, s.pool, sql, args)
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.EventType{}, fmt.Errorf("%w %q", ErrEventTypeNotFound, name)
	}
	return t, err
}

// eventTypeArgs are t's parameters; a nil schema or example is NULL.
func eventTypeArgs(t webhook.EventType) pgx.NamedArgs {
	return pgx.NamedArgs{"name": t.Name, "description": t.Description, "schema": jsonOrNull(t.Schema),
		"example": jsonOrNull(t.Example), "deprecated": t.Deprecated}
}

// jsonOrNull is the JSON text of b, or NULL when b is empty.
func jsonOrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}
