package endpoints

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Stat is an endpoint and the counts of its deliveries.
type Stat struct {
	Endpoint
	// Pending: due now and not leased (a lease that expired counts here).
	Pending int64 `json:"pending_due"`
	// Scheduled: due later (retries, deferrals).
	Scheduled int64 `json:"scheduled"`
	// InFlight: held by a worker under a live lease.
	InFlight int64 `json:"in_flight"`
	// DeadLetters: in webhook_dead_letter.
	DeadLetters int64 `json:"dead_letters"`
}

// statsSQL reads the pending rows once, through the partial index of pending
// rows, and the dead letters once, each grouped by endpoint; the WEBHOOK_URL
// endpoint is endpoint_id NULL (an event row not fanned out yet, fanout
// NULL, is nobody's delivery yet). The joins are on a non-null key so that
// they can hash. Dead letters of removed endpoints are in no line.
const statsSQL = `WITH p AS (
  SELECT coalesce(endpoint_id, '00000000-0000-0000-0000-000000000000') AS k,
         count(*) FILTER (WHERE created_at <= now() AND (locked_until IS NULL OR locked_until <= now())) AS due,
         count(*) FILTER (WHERE created_at > now()) AS scheduled,
         count(*) FILTER (WHERE locked_until > now()) AS in_flight
  FROM webhook_outbox WHERE NOT processed AND (endpoint_id IS NOT NULL OR fanout IS NOT NULL)
  GROUP BY 1
), d AS (
  SELECT coalesce(endpoint_id, '00000000-0000-0000-0000-000000000000') AS k, count(*) AS dead
  FROM webhook_dead_letter GROUP BY 1
), e AS (
  SELECT id, id AS k, name, url, event_types, enabled, disabled_reason, retry_rps, created_at, updated_at,
         failing_since, last_error, last_status, last_error_at, disabled_at
  FROM webhook_endpoints
  UNION ALL
  SELECT NULL, '00000000-0000-0000-0000-000000000000', $1, '', '{}', true, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
)
SELECT coalesce(e.id::text, ''), e.name, e.url, e.event_types, e.enabled, coalesce(e.disabled_reason, ''), coalesce(e.retry_rps, 0),
       coalesce(e.created_at, '0001-01-01 00:00:00+00'), coalesce(e.updated_at, '0001-01-01 00:00:00+00'),
       e.failing_since, coalesce(e.last_error, ''), coalesce(e.last_status, 0), e.last_error_at, e.disabled_at,
       coalesce(p.due, 0), coalesce(p.scheduled, 0), coalesce(p.in_flight, 0), coalesce(d.dead, 0)
FROM e LEFT JOIN p ON p.k = e.k LEFT JOIN d ON d.k = e.k
ORDER BY e.id IS NOT NULL, e.name`

// Stats returns every endpoint with its counts, the WEBHOOK_URL endpoint
// first (Name DefaultName, ID "", Enabled, no URL: the environment holds
// it), then the others by name.
func (s *Store) Stats(ctx context.Context) ([]Stat, error) {
	rows, err := s.pool.Query(ctx, statsSQL, DefaultName)
	if err != nil {
		return nil, fmt.Errorf("endpoint stats: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Stat, error) {
		var st Stat
		err := r.Scan(append(st.fields(), &st.Pending, &st.Scheduled, &st.InFlight, &st.DeadLetters)...)
		if st.EventTypes == nil {
			st.EventTypes = []string{}
		}
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint stats: %w", err)
	}
	return list, nil
}
