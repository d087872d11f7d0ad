package outbox

import (
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// endpointRecord is an endpoint as a statement returns it by name (see
// rotate_secret): never a secret; every time through webhook_time_clamp;
// the end of a grace period only while it lasts.
type endpointRecord struct {
	ID                  string     `db:"id"`
	Name                string     `db:"name"`
	URL                 string     `db:"url"`
	EventTypes          []string   `db:"event_types"`
	Enabled             bool       `db:"enabled"`
	DisabledReason      string     `db:"disabled_reason"`
	RetryRPS            int        `db:"retry_rps"`
	CreatedAt           time.Time  `db:"created_at"`
	UpdatedAt           time.Time  `db:"updated_at"`
	FailingSince        *time.Time `db:"failing_since"`
	LastError           string     `db:"last_error"`
	LastStatus          int        `db:"last_status"`
	LastErrorAt         *time.Time `db:"last_error_at"`
	DisabledAt          *time.Time `db:"disabled_at"`
	PreviousSecretUntil *time.Time `db:"previous_secret_until"`
	ClientCertNotAfter  *time.Time `db:"client_cert_not_after"`
	Ordering            string     `db:"ordering"`
}

// endpoint is r as the catalog hands it out (a conversion: the fields are
// webhook.Endpoint's, in its order). EventTypes is never nil.
func (r endpointRecord) endpoint() webhook.Endpoint {
	if r.EventTypes == nil {
		r.EventTypes = []string{}
	}
	return webhook.Endpoint(r)
}
