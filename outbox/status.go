package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// fanOutInFlightSQL is, as a FROM clause and its WHERE, the deliveries of
// the fan-outs in flight (migration 018) whose outcome is not written yet:
// x.endpoint_id of event o, in flight while o's lease lasts. They have no
// row of their own; x.delivery_id is the id the claim gave each (as every
// fan-out's: md5 of the event's id and the endpoint's). Read through
// webhook_outbox_events_idx.
const fanOutInFlightSQL = `webhook_outbox o
  CROSS JOIN LATERAL (SELECT e, md5(o.delivery_id::text || '/' || e::text)::uuid FROM unnest(o.fan_to) AS e) AS x(endpoint_id, delivery_id)
  WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL AND o.fan_to IS NOT NULL
    AND x.endpoint_id <> ALL(coalesce(o.fan_done, '{}'))`

// DefaultEndpointName is the name the store's reads give the WEBHOOK_URL
// endpoint, whose rows have endpoint_id NULL (dispatcher.DefaultEndpointName
// and endpoints.DefaultName are the same name).
const DefaultEndpointName = "default"

// pendingRowsSQL is every pending row of webhook_outbox, read through the
// four partial indexes that together hold them (migrations 012, 015): an
// endpoint's deliveries, the events not fanned out yet, the WEBHOOK_URL
// endpoint's deliveries, and the rows of either waiting behind the head
// of their key (held). A plain "WHERE NOT processed" matches none of them,
// and would read the history too.
const pendingRowsSQL = `(SELECT * FROM webhook_outbox WHERE NOT processed AND endpoint_id IS NOT NULL AND NOT held
  UNION ALL SELECT * FROM webhook_outbox WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NULL
  UNION ALL SELECT * FROM webhook_outbox WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NOT NULL AND NOT held
  UNION ALL ` + laneRowsSQL + `)`

// QueueStatus is the outbox as `worker status` reports it. The JSON names
// are the command's.
type QueueStatus struct {
	PendingDue        int64   `json:"pending_due"`                // due now (DueSQL), not waiting behind their key
	Waiting           int64   `json:"waiting_for_key"`            // waiting behind the head of their ordering key
	ScheduledRetries  int64   `json:"scheduled"`                  // pending, created_at still to come
	InFlight          int64   `json:"in_flight"`                  // held by a live lease
	OldestPendingSecs float64 `json:"oldest_pending_seconds"`     // age of the oldest pending row whose time has come, seconds
	ProcessedLastHour int64   `json:"processed_last_hour"`        // processed in the last hour, unrouted events aside
	UnroutedLastHour  int64   `json:"unrouted_last_hour"`         // events fanned out to no endpoint, last hour
	LeasesReclaimed   int64   `json:"leases_reclaimed_last_hour"` // reclaims of the pending rows and the last hour's processed ones
	DeadLetters       int64   `json:"dead_letters"`
	ListeningWorkers  int64   `json:"listening_workers"` // sessions of the listener on this database
}

// QueueStatusSQL reads the pending rows once (pendingRowsSQL) and the last hour's processed rows once (through the
// processed_at index). Rows in flight are held under a live lease; a due row
// whose lease expired counts as due (DueSQL: any worker's next claim takes
// it). The oldest age is read through webhook_time_clamp, so that a time out
// of range (a database whose time constraints were dropped) cannot fail it.
const QueueStatusSQL = `WITH pending AS (
  SELECT count(*) FILTER (WHERE ` + DueSQL + ` AND NOT o.held) AS due,
         count(*) FILTER (WHERE o.held) AS waiting,
         count(*) FILTER (WHERE o.created_at > now() AND NOT o.held) AS scheduled,
         coalesce(sum(coalesce(cardinality(o.fan_to) - coalesce(cardinality(o.fan_done), 0), 1)) FILTER (WHERE o.locked_until > now()), 0)
           AS in_flight,
         COALESCE(EXTRACT(EPOCH FROM now() - min(webhook_time_clamp(o.created_at)) FILTER (WHERE o.created_at <= now())), 0) AS oldest,
         COALESCE(sum(o.reclaims), 0) AS reclaims
  FROM ` + pendingRowsSQL + ` o
), recent AS (
  SELECT count(*) FILTER (WHERE endpoint_id IS NOT NULL OR fanout IS DISTINCT FROM 0) AS processed,
         count(*) FILTER (WHERE endpoint_id IS NULL AND fanout = 0) AS unrouted,
         COALESCE(sum(reclaims), 0) AS reclaims
  FROM webhook_outbox WHERE processed AND processed_at > now() - interval '1 hour'
)
SELECT pending.due, pending.waiting, pending.scheduled, pending.in_flight, pending.oldest, recent.processed, recent.unrouted,
  pending.reclaims + recent.reclaims,
  (SELECT count(*) FROM webhook_dead_letter),
  (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'fluxora-webhook-listener')
FROM pending, recent`

// QueueStatus reads the outbox's counts.
func (s *Store) QueueStatus(ctx context.Context) (QueueStatus, error) {
	var q QueueStatus
	err := s.pool.QueryRow(ctx, QueueStatusSQL).Scan(&q.PendingDue, &q.Waiting, &q.ScheduledRetries, &q.InFlight, &q.OldestPendingSecs,
		&q.ProcessedLastHour, &q.UnroutedLastHour, &q.LeasesReclaimed, &q.DeadLetters, &q.ListeningWorkers)
	if err != nil {
		return QueueStatus{}, fmt.Errorf("queue status: %w", err)
	}
	return q, nil
}

// EndpointStatus is one endpoint's line of `worker status`. The JSON names
// are the command's; the URL is never printed (it may hold a token).
type EndpointStatus struct {
	Name           string     `json:"name"`
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	Pending        int64      `json:"pending_due"` // due now (DueSQL), not waiting behind their key
	Waiting        int64      `json:"waiting_for_key"`
	Scheduled      int64      `json:"scheduled"`
	InFlight       int64      `json:"in_flight"`
	DeadLetters    int64      `json:"dead_letters"`
	FailingSince   *time.Time `json:"failing_since,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	LastStatus     *int       `json:"last_status,omitempty"`
	LastErrorAt    *time.Time `json:"last_error_at,omitempty"`
	// URL is the endpoint's URL as the table holds it; "" for the
	// WEBHOOK_URL endpoint, which the table does not hold.
	URL string `json:"-"`
	// ClientCertNotAfter is when its client certificate expires; nil
	// for none.
	ClientCertNotAfter *time.Time `json:"client_cert_not_after,omitempty"`
	// SecretUnreadable is why a worker cannot open its secret (the
	// credential and key id; "" when none said so), and
	// SecretUnreadableAt when it last found it so: its rows are kept
	// pending, deferred, until a worker holding the key sends them.
	SecretUnreadable   string     `json:"secret_unreadable,omitempty"`
	SecretUnreadableAt *time.Time `json:"secret_unreadable_at,omitempty"`
}

// noEndpointSQL stands for the WEBHOOK_URL endpoint's NULL id in
// EndpointStatusSQL's joins, which say "a IS NOT DISTINCT FROM b" as
// equalities a hash join can use: IS NOT DISTINCT FROM cannot, and joined
// by a nested loop over every pair, a cost that grows with the square of
// the endpoints.
const noEndpointSQL = `'00000000-0000-0000-0000-000000000000'::uuid`

// EndpointStatusSQL reads every endpoint of the table, and the WEBHOOK_URL
// one (DefaultEndpointName) when @env (it is configured) or it has rows:
// pending rows once (pendingRowsSQL), dead letters
// once; an event fanned out in flight (migration 018) counts one row in
// flight for each endpoint of fan_to not in fan_done while its lease
// lasts (fanOutInFlightSQL). A row with endpoint_id NULL and fanout NULL
// is an event not fanned out yet, nobody's delivery. @only, when not
// empty, keeps the endpoint of that name. The health times are read
// through webhook_time_clamp. secret_unreadable is a worker's mark
// (MarkSecretUnreadableSQL).
const EndpointStatusSQL = `WITH p AS (
  SELECT endpoint_id, sum(due) AS due, sum(waiting) AS waiting, sum(scheduled) AS scheduled, sum(in_flight) AS in_flight
  FROM (
    SELECT o.endpoint_id,
           count(*) FILTER (WHERE ` + DueSQL + ` AND NOT o.held) AS due,
           count(*) FILTER (WHERE o.held) AS waiting,
           count(*) FILTER (WHERE o.created_at > now() AND NOT o.held) AS scheduled,
           count(*) FILTER (WHERE o.locked_until > now()) AS in_flight
    FROM ` + pendingRowsSQL + ` o WHERE o.endpoint_id IS NOT NULL OR o.fanout IS NOT NULL
    GROUP BY o.endpoint_id
    UNION ALL
    SELECT x.endpoint_id, 0, 0, 0, count(*) FROM ` + fanOutInFlightSQL + ` AND o.locked_until > now()
    GROUP BY x.endpoint_id
  ) s
  GROUP BY endpoint_id
), d AS (
  SELECT endpoint_id, count(*) AS dead FROM webhook_dead_letter GROUP BY endpoint_id
), e AS (
  SELECT id, name, url, enabled, coalesce(disabled_reason, '') AS disabled_reason, webhook_time_clamp(failing_since) AS failing_since,
         coalesce(last_error, '') AS last_error, last_status, webhook_time_clamp(last_error_at) AS last_error_at,
         webhook_time_clamp(client_cert_not_after) AS client_cert_not_after,
         coalesce(secret_unreadable, '') AS secret_unreadable, secret_unreadable_at
  FROM webhook_endpoints
  UNION ALL
  SELECT NULL, '` + DefaultEndpointName + `', '', true, '', NULL, '', NULL, NULL, NULL, '', NULL
  WHERE @env::boolean OR EXISTS (SELECT 1 FROM p WHERE endpoint_id IS NULL) OR EXISTS (SELECT 1 FROM d WHERE endpoint_id IS NULL)
)
SELECT e.name, e.url, e.enabled, e.disabled_reason, coalesce(p.due, 0), coalesce(p.waiting, 0), coalesce(p.scheduled, 0), coalesce(p.in_flight, 0),
       coalesce(d.dead, 0), e.failing_since, e.last_error, e.last_status, e.last_error_at, e.client_cert_not_after,
       e.secret_unreadable, e.secret_unreadable_at
FROM e
  LEFT JOIN p ON coalesce(p.endpoint_id, ` + noEndpointSQL + `) = coalesce(e.id, ` + noEndpointSQL + `) AND (p.endpoint_id IS NULL) = (e.id IS NULL)
  LEFT JOIN d ON coalesce(d.endpoint_id, ` + noEndpointSQL + `) = coalesce(e.id, ` + noEndpointSQL + `) AND (d.endpoint_id IS NULL) = (e.id IS NULL)
WHERE @only::text = '' OR e.name = @only::text
ORDER BY e.id IS NOT NULL, e.name`

// EndpointStatus reads the endpoints' status, the WEBHOOK_URL one first
// (included when env, it is configured, or when it has rows); only, when not
// empty, names the one endpoint wanted. None: an empty, non-nil list.
func (s *Store) EndpointStatus(ctx context.Context, env bool, only string) ([]EndpointStatus, error) {
	rows, err := s.pool.Query(ctx, EndpointStatusSQL, pgx.NamedArgs{"env": env, "only": only})
	if err != nil {
		return nil, fmt.Errorf("endpoint status: %w", err)
	}
	out := []EndpointStatus{}
	var e EndpointStatus
	_, err = pgx.ForEachRow(rows, []any{&e.Name, &e.URL, &e.Enabled, &e.DisabledReason, &e.Pending, &e.Waiting, &e.Scheduled, &e.InFlight,
		&e.DeadLetters, &e.FailingSince, &e.LastError, &e.LastStatus, &e.LastErrorAt, &e.ClientCertNotAfter,
		&e.SecretUnreadable, &e.SecretUnreadableAt}, func() error {
		out = append(out, e)
		e = EndpointStatus{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint status: %w", err)
	}
	return out, nil
}
