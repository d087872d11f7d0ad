package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The status's statements (queries/status.sql).
var (
	queueStatusSQL    = rawStatement("queue_status")
	endpointStatusSQL = rawStatement("endpoint_status")
)

// DefaultEndpointName is the name the store's reads give the WEBHOOK_URL
// endpoint, whose rows have endpoint_id NULL (dispatcher.DefaultEndpointName
// and endpoints.DefaultName are the same name, and so is the schema's
// webhook_endpoint_name).
const DefaultEndpointName = "default"

// QueueStatus is the outbox as `worker status` reports it. The JSON names
// are the command's, and the columns of queue_status.
type QueueStatus struct {
	PendingDue        int64   `json:"pending_due" db:"pending_due"`                               // due now, as a claim takes them, not waiting behind their key
	Waiting           int64   `json:"waiting_for_key" db:"waiting_for_key"`                       // waiting behind the head of their ordering key
	ScheduledRetries  int64   `json:"scheduled" db:"scheduled"`                                   // pending, created_at still to come
	InFlight          int64   `json:"in_flight" db:"in_flight"`                                   // held by a live lease
	OldestPendingSecs float64 `json:"oldest_pending_seconds" db:"oldest_pending_seconds"`         // age of the oldest pending row whose time has come, seconds
	ProcessedLastHour int64   `json:"processed_last_hour" db:"processed_last_hour"`               // processed in the last hour, unrouted events aside
	UnroutedLastHour  int64   `json:"unrouted_last_hour" db:"unrouted_last_hour"`                 // events fanned out to no endpoint, last hour
	LeasesReclaimed   int64   `json:"leases_reclaimed_last_hour" db:"leases_reclaimed_last_hour"` // reclaims of the pending rows and the last hour's processed ones
	DeadLetters       int64   `json:"dead_letters" db:"dead_letters"`
	ListeningWorkers  int64   `json:"listening_workers" db:"listening_workers"` // sessions of the listener on this database
}

// QueueStatus reads the outbox's counts (queue_status).
func (s *Store) QueueStatus(ctx context.Context) (QueueStatus, error) {
	q, err := queryOne[QueueStatus](ctx, s.pool, queueStatusSQL, nil)
	if err != nil {
		return QueueStatus{}, fmt.Errorf("queue status: %w", err)
	}
	return q, nil
}

// EndpointStatus is one endpoint's line of `worker status`. The JSON names
// are the command's; the URL is never printed (it may hold a token). The
// db names are the columns of endpoint_status.
type EndpointStatus struct {
	Name           string     `json:"name" db:"name"`
	Enabled        bool       `json:"enabled" db:"enabled"`
	DisabledReason string     `json:"disabled_reason,omitempty" db:"disabled_reason"`
	Pending        int64      `json:"pending_due" db:"pending_due"` // due now, as a claim takes them, not waiting behind their key
	Waiting        int64      `json:"waiting_for_key" db:"waiting_for_key"`
	Scheduled      int64      `json:"scheduled" db:"scheduled"`
	InFlight       int64      `json:"in_flight" db:"in_flight"`
	DeadLetters    int64      `json:"dead_letters" db:"dead_letters"`
	FailingSince   *time.Time `json:"failing_since,omitempty" db:"failing_since"`
	LastError      string     `json:"last_error,omitempty" db:"last_error"`
	LastStatus     *int       `json:"last_status,omitempty" db:"last_status"`
	LastErrorAt    *time.Time `json:"last_error_at,omitempty" db:"last_error_at"`
	// URL is the endpoint's URL as the table holds it; "" for the
	// WEBHOOK_URL endpoint, which the table does not hold.
	URL string `json:"-" db:"url"`
	// ClientCertNotAfter is when its client certificate expires; nil
	// for none.
	ClientCertNotAfter *time.Time `json:"client_cert_not_after,omitempty" db:"client_cert_not_after"`
	// SecretUnreadable is why a worker cannot open its secret (the
	// credential and key id; "" when none said so), and
	// SecretUnreadableAt when it last found it so: its rows are kept
	// pending, deferred, until a worker holding the key sends them.
	SecretUnreadable   string     `json:"secret_unreadable,omitempty" db:"secret_unreadable"`
	SecretUnreadableAt *time.Time `json:"secret_unreadable_at,omitempty" db:"secret_unreadable_at"`
}

// EndpointStatus reads the endpoints' status (endpoint_status), the
// WEBHOOK_URL one first (included when env, it is configured, or when it
// has rows); only, when not empty, names the one endpoint wanted. None: an
// empty, non-nil list.
func (s *Store) EndpointStatus(ctx context.Context, env bool, only string) ([]EndpointStatus, error) {
	list, err := queryAll[EndpointStatus](ctx, s.pool, endpointStatusSQL, pgx.NamedArgs{"env": env, "only": only})
	if err != nil {
		return nil, fmt.Errorf("endpoint status: %w", err)
	}
	return list, nil
}
