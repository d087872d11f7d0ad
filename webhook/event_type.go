package webhook

import (
	"encoding/json"
	"time"
)

// EventType is one entry of the event catalog (webhook_event_types): a
// type the producers write, what it means and the shape of its payload.
// The JSON names are those of `worker event-types list --json`.
type EventType struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Schema is the JSON Schema of its payloads (draft 2020-12 unless it
	// names another); nil: any JSON.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Example is an example payload; nil: none.
	Example json.RawMessage `json:"example,omitempty"`
	// Deprecated types are still accepted; consumers are told.
	Deprecated bool      `json:"deprecated"`
	CreatedAt  time.Time `json:"created_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
}
