package webhook

import "time"

// OperatorTypes is the prefix of the event types kept for the worker's own
// operator events. An endpoint subscribed to every type never receives
// them, nor does the WEBHOOK_URL endpoint: only an endpoint that names
// them, exactly or by a pattern that starts with this prefix
// (webhook_subscribed, migration 024).
const OperatorTypes = "fluxora."

// Endpoint is one row of webhook_endpoints as the catalog reads it (the
// store scans it; the endpoints package and the operator commands show it),
// without its secrets: the store never reads them into an Endpoint. The
// JSON names are those of `worker endpoints list --json`.
type Endpoint struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
	// EventTypes is empty for every event type (but OperatorTypes); an
	// entry ending in "*" is a pattern: every type that starts with what
	// precedes the "*".
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
	// ClientCertNotAfter is when its client certificate (mutual TLS)
	// expires; nil when it has none. The key is never read.
	ClientCertNotAfter *time.Time `json:"client_cert_not_after,omitempty"`
	// Ordering is what a dead-lettered delivery with an ordering key does
	// to its key: OrderingMoveOn (the default) lets the next event go;
	// OrderingHold keeps the key waiting until it is replayed or purged.
	Ordering string `json:"ordering"`
}

// The values of Endpoint.Ordering (webhook_endpoints.ordering).
const (
	OrderingMoveOn = "move-on"
	OrderingHold   = "hold"
)
