package outbox

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fluxora/webhook-worker/webhook"
)

// ClaimSQL walks the partial index webhook_outbox_pending_idx in the
// documented order, skipping rows another worker holds (a live lease, or
// the row lock of a claim in progress) and rows of the endpoints this worker
// has at their concurrency cap (@skip, and @skip_env for the WEBHOOK_URL endpoint).
// reclaimed is true for a row whose previous lease expired without an
// outcome or a release; reclaims saturates at the integer's end rather
// than fail the claim. The redundant "id = ANY(ARRAY(…))" gives the
// planner an index condition on the primary key: without it, the generic
// plan of the prepared statement (which assumes LIMIT @limit is a tenth of the
// pending rows) joins through a sequential scan of the whole table,
// processed rows included.
//
// Fan-out, in the same statement: an event row (endpoint_id NULL, fanout
// NULL) gets one delivery row per enabled endpoint subscribed to its type,
// due at once with the event's created_at, and a delivery id derived from
// the event's and the endpoint's; its fanout becomes the number of
// deliveries made; each delivery carries the event's headers. With a
// WEBHOOK_URL endpoint (@env) the event row itself is that endpoint's
// delivery, leased and returned (or left pending when that endpoint is at
// its cap, @skip_env); without one it is marked processed (fanout 0: unrouted). All
// of it commits together or not at all, so an event is never fanned out
// twice or half.
//
// A rotated endpoint's previous secret is returned only while its grace
// period lasts by the database clock.
const ClaimSQL = `WITH due AS (
  SELECT id, endpoint_id, event_type, lease_token IS NOT NULL AS reclaimed, (endpoint_id IS NULL AND fanout IS NULL) AS fan
  FROM webhook_outbox o
  WHERE ` + DueSQL + `
    AND (endpoint_id IS NULL OR endpoint_id <> ALL(@skip::uuid[]))
    AND NOT (@skip_env::boolean AND endpoint_id IS NULL AND fanout IS NOT NULL)
  ORDER BY created_at, id
  LIMIT @limit
  FOR UPDATE SKIP LOCKED
), targets AS (
  SELECT due.id AS event_id, e.id AS endpoint_id
  FROM due JOIN webhook_endpoints e
    ON e.enabled AND (cardinality(e.event_types) = 0 OR due.event_type = ANY(e.event_types))
  WHERE due.fan
), fanned AS (
  INSERT INTO webhook_outbox (delivery_id, event_type, payload, created_at, endpoint_id, headers)
  SELECT md5(o.delivery_id::text || '/' || t.endpoint_id::text)::uuid, o.event_type, o.payload, o.created_at, t.endpoint_id, o.headers
  FROM targets t JOIN webhook_outbox o ON o.id = t.event_id
  WHERE o.id = ANY(ARRAY(SELECT event_id FROM targets))
), counts AS (
  SELECT event_id, count(*)::int AS n FROM targets GROUP BY event_id
)
UPDATE webhook_outbox o
SET locked_until = CASE WHEN due.fan AND (NOT @env::boolean OR @skip_env::boolean) THEN NULL ELSE now() + @lease_ms * interval '1 millisecond' END,
    lease_token = CASE WHEN due.fan AND (NOT @env::boolean OR @skip_env::boolean) THEN NULL ELSE gen_random_uuid() END,
    reclaims = least(o.reclaims::bigint + due.reclaimed::int, 2147483647)::int,
    fanout = CASE WHEN due.fan THEN coalesce(counts.n, 0) + @env::boolean::int ELSE o.fanout END,
    processed = due.fan AND NOT @env::boolean,
    processed_at = CASE WHEN due.fan AND NOT @env::boolean THEN now() END
FROM due
  LEFT JOIN counts ON counts.event_id = due.id
  LEFT JOIN webhook_endpoints e ON e.id = due.endpoint_id
WHERE o.id = ANY(ARRAY(SELECT id FROM due)) AND o.id = due.id
RETURNING o.id, coalesce(o.lease_token, '00000000-0000-0000-0000-000000000000'::uuid), o.delivery_id::text,
  o.event_type, CASE WHEN o.processed THEN NULL ELSE o.payload::text END,
  CASE WHEN o.processed THEN NULL ELSE o.headers::text END, o.attempt, o.created_at, due.reclaimed,
  coalesce(o.endpoint_id::text, ''), coalesce(e.name, ''), coalesce(e.url, ''), coalesce(e.secret, ''),
  coalesce(e.enabled, true), coalesce(e.disabled_reason, ''), coalesce(e.retry_rps, 0),
  CASE WHEN e.secret_previous_until > now() THEN e.secret_previous ELSE '' END,
  CASE WHEN e.secret_previous_until > now() THEN e.secret_previous_until END,
  o.lease_token IS NOT NULL, due.fan, coalesce(o.fanout, 0),
  (SELECT count(*) FROM webhook_endpoints WHERE enabled)`

// NextDueSQL gives the milliseconds, by the database clock, until the
// earliest pending row that is not yet due (NULL when there is none).
const NextDueSQL = `SELECT (EXTRACT(EPOCH FROM (min(created_at) - clock_timestamp())) * 1000)::bigint
FROM webhook_outbox
WHERE NOT processed AND created_at > now()`

// nextDueMaxMS caps what NextDue returns: a day, in milliseconds.
const nextDueMaxMS = 24 * 60 * 60 * 1000

// ClaimQuery is what one Claim takes.
type ClaimQuery struct {
	// Limit is the most rows (at least 1).
	Limit int
	// Lease is how long, by the database clock, the claim holds its rows.
	Lease time.Duration
	// Skip lists endpoints (uuid text) whose rows the claim leaves alone:
	// those at their concurrency cap in this worker.
	Skip []string
	// SkipEnv leaves the WEBHOOK_URL endpoint's deliveries alone. Events
	// still in want of fan-out are claimed anyway.
	SkipEnv bool
	// Env says the worker delivers to a WEBHOOK_URL endpoint: an event's
	// own row is then that endpoint's delivery. Without it, an event is
	// only fanned out to the endpoints of webhook_endpoints.
	Env bool
}

// Batch is what one Claim returns.
type Batch struct {
	// Rows are the deliveries leased to the caller, oldest first.
	Rows []webhook.Delivery
	// Taken is how many rows the claim took: Rows, the broken ones, and
	// the events it fanned out and recorded processed at once (no
	// WEBHOOK_URL endpoint). Taken == Limit means more rows may be due.
	Taken int
	// FannedOut is how many events the claim fanned out; Deliveries how
	// many endpoint delivery rows that made. Those rows are due at once and
	// were not claimed by this call.
	FannedOut, Deliveries int
	// Unrouted lists the event types of events the claim found no
	// endpoint for: they are recorded processed with fanout 0.
	Unrouted []string
	// Endpoints is the number of enabled endpoints in webhook_endpoints at
	// the claim (0 when nothing was claimed).
	Endpoints int
	// Broken lists the leased rows the worker could not decode (a time
	// the schema would refuse): they are not in Rows, and were moved to
	// the dead letter, each with its Reason, in a statement of their own.
	Broken []Broken
	// BrokenErr is the error of that move, if it failed: the broken rows
	// then stay leased, to be claimed again when their lease ends.
	BrokenErr error
}

// Claim leases due rows (see ClaimQuery), fanning out the events among
// them, in one statement and one round trip. It returns an empty Batch
// and no error when nothing is due.
func (s *Store) Claim(ctx context.Context, q ClaimQuery) (Batch, error) {
	skip := q.Skip
	if skip == nil {
		skip = []string{}
	}
	rows, err := s.pool.Query(ctx, ClaimSQL, pgx.NamedArgs{"limit": q.Limit, "lease_ms": q.Lease.Milliseconds(),
		"skip": skip, "skip_env": q.SkipEnv, "env": q.Env})
	if err != nil {
		return Batch{}, fmt.Errorf("claim: %w", err)
	}
	var b Batch
	var r webhook.Delivery
	var leased, fan bool
	var fanout int
	var createdAt, prevUntil pgtype.Timestamptz
	var brokenTokens []webhook.Token
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Token, &r.DeliveryID, &r.EventType, &r.Payload, &r.Headers, &r.Attempt, &createdAt, &r.Reclaimed,
		&r.EndpointID, &r.EndpointName, &r.URL, &r.Secret, &r.Enabled, &r.DisabledReason, &r.RetryRPS,
		&r.PreviousSecret, &prevUntil, &leased, &fan, &fanout, &b.Endpoints}, func() error {
		b.Taken++
		if fan {
			b.FannedOut++
			b.Deliveries += fanout
			if q.Env {
				b.Deliveries-- // the event row itself
			}
			if fanout == 0 {
				b.Unrouted = append(b.Unrouted, r.EventType)
			}
		}
		if leased {
			if err := decodeTimes(&r, createdAt, prevUntil); err != nil {
				b.Broken = append(b.Broken, Broken{ID: r.ID, DeliveryID: r.DeliveryID, Reason: "the worker cannot handle this row: " + err.Error()})
				brokenTokens = append(brokenTokens, r.Token)
			} else {
				b.Rows = append(b.Rows, r)
			}
		}
		r.Payload, r.Headers = nil, nil // the next row scans into fresh slices
		return nil
	})
	if err != nil {
		return Batch{}, fmt.Errorf("claim: %w", err)
	}
	if len(b.Broken) > 0 {
		// Its batch mates are leased already and go on.
		b.BrokenErr = s.deadLetterBroken(ctx, b.Broken, brokenTokens)
	}
	// UPDATE … RETURNING has no order of its own.
	slices.SortFunc(b.Rows, func(a, b webhook.Delivery) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return b, nil
}

// decodeTimes sets r's times from the claim's, or says why the worker
// cannot handle them. A previous secret's end out of range ends its grace
// period at once.
func decodeTimes(r *webhook.Delivery, createdAt, prevUntil pgtype.Timestamptz) error {
	t, err := timeOf("created_at", createdAt)
	if err != nil {
		return err
	}
	r.CreatedAt = t
	r.PreviousUntil = time.Time{}
	if until, err := timeOf("secret_previous_until", prevUntil); err == nil {
		r.PreviousUntil = until
	} else {
		r.PreviousSecret = ""
	}
	return nil
}

// NextDue returns how long, by the database clock, until the earliest
// scheduled (not yet due) pending row is due, at most a day; ok is false
// when there is none.
func (s *Store) NextDue(ctx context.Context) (d time.Duration, ok bool, err error) {
	var ms *int64
	if err := s.pool.QueryRow(ctx, NextDueSQL).Scan(&ms); err != nil {
		return 0, false, fmt.Errorf("next due: %w", err)
	}
	if ms == nil {
		return 0, false, nil
	}
	// A row due centuries from now would overflow a Duration: a day is as
	// good, the dispatcher asks again long before.
	return time.Duration(min(max(*ms, 0), nextDueMaxMS)) * time.Millisecond, true, nil
}
