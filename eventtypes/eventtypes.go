// Package eventtypes holds the rules of the event catalog
// (webhook_event_types, migration 029): which names a type may have, the
// strict rule (Catalog.Problem, the same rule and text as the SQL function
// webhook_event_type_problem), a payload's check against its type's JSON
// Schema (Catalog.Validate), the check of an endpoint's subscription
// against the catalog (CheckSubscription, with its "did you mean") and the
// catalog as an OpenAPI document (OpenAPI).
//
// The worker applies it to every delivery before its first attempt (Live
// keeps its catalog current), the producer kit before its round trip; it
// imports no database driver, so that the producer kit may import it.
package eventtypes

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/fluxora/webhook-worker/webhook"
)

// MaxNameBytes is the longest type name, the rule of
// webhook_outbox.event_type.
const MaxNameBytes = 255

// CheckName says why name may not be a type of the catalog, or nil: the
// rule of webhook_outbox.event_type (1 to 255 bytes without control
// characters), no "*" (that is a subscription's pattern), and not the
// worker's own prefix (webhook.OperatorTypes: its types are always known).
// The constraint webhook_event_types_name_valid is the same rule.
func CheckName(name string) error {
	switch {
	case name == "" || len(name) > MaxNameBytes || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%q: a type must be 1-255 bytes without control characters", name)
	case strings.Contains(name, "*"):
		return fmt.Errorf(`%q: a type may not hold "*" (a subscription's pattern)`, name)
	case strings.HasPrefix(name, webhook.OperatorTypes):
		return fmt.Errorf("%q: types starting with %q are the worker's own", name, webhook.OperatorTypes)
	}
	return nil
}

// Catalog is the event catalog as read at one version: its types, their
// schemas compiled, and strict mode. It is immutable: safe for concurrent
// use; a change makes a new Catalog (New).
type Catalog struct {
	strict  bool
	version int64
	types   map[string]*entry
	names   []string // sorted
}

// entry is one type and its schema, compiled.
type entry struct {
	t      webhook.EventType
	schema *Schema // nil: any JSON
	broken error   // the schema does not compile: its events are refused
}

// New compiles the schemas of types and returns the catalog. A schema
// that does not compile does not stop the others: its type's payloads are
// refused with ErrSchemaBroken (see Broken).
func New(types []webhook.EventType, strict bool, version int64) *Catalog {
	c := &Catalog{strict: strict, version: version, types: make(map[string]*entry, len(types))}
	for _, t := range types {
		e := &entry{t: t}
		if len(t.Schema) > 0 {
			e.schema, e.broken = Compile(t.Name, t.Schema)
		}
		c.types[t.Name] = e
		c.names = append(c.names, t.Name)
	}
	slices.Sort(c.names)
	return c
}

// Empty is the catalog of a database that lists no type, strict off.
func Empty() *Catalog { return New(nil, false, 0) }

// Strict reports whether strict mode is on.
func (c *Catalog) Strict() bool { return c.strict }

// Names are the types, sorted.
func (c *Catalog) Names() []string { return slices.Clone(c.names) }

// Known reports whether events of type name are known: listed, or the
// worker's own (webhook.OperatorTypes).
func (c *Catalog) Known(name string) bool {
	_, ok := c.types[name]
	return ok || strings.HasPrefix(name, webhook.OperatorTypes)
}

// Broken returns, for each type whose schema does not compile, why.
func (c *Catalog) Broken() map[string]error {
	out := map[string]error{}
	for n, e := range c.types {
		if e.broken != nil {
			out[n] = e.broken
		}
	}
	return out
}

// Problem is the strict rule: why an event of type eventType may not be
// written, or "". While strict is on, a type the catalog does not list is
// refused, but the worker's own. The SQL function
// webhook_event_type_problem (migration 029) is the same rule, with the
// same text.
func (c *Catalog) Problem(eventType string) string {
	if !c.strict || c.Known(eventType) {
		return ""
	}
	return "unknown event type " + eventType + ": the event catalog is strict"
}

// ErrUnknownType is Check's error for an event the strict rule refuses;
// its text is Problem's.
var ErrUnknownType = errors.New("unknown event type")

// Check applies the catalog to an event: the strict rule (an error
// wrapping ErrUnknownType), then its type's schema (Validate).
func (c *Catalog) Check(eventType string, payload []byte) error {
	if p := c.Problem(eventType); p != "" {
		return &problemError{p}
	}
	return c.Validate(eventType, payload)
}

// problemError is Problem's text as an error wrapping ErrUnknownType.
type problemError struct{ text string }

func (e *problemError) Error() string { return e.text }
func (e *problemError) Unwrap() error { return ErrUnknownType }

// Validate checks payload against the schema of its type. A type without
// a schema, or not listed, takes any payload. A payload that does not
// match returns a *PayloadError; a type whose schema does not compile, an
// error wrapping ErrSchemaBroken.
func (c *Catalog) Validate(eventType string, payload []byte) error {
	e := c.types[eventType]
	switch {
	case e == nil || (e.schema == nil && e.broken == nil):
		return nil
	case e.broken != nil:
		return fmt.Errorf("%w: %s: %w", ErrSchemaBroken, eventType, e.broken)
	}
	return e.schema.Validate(eventType, payload)
}
