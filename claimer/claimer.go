// Package claimer claims due outbox rows under a lease and records their
// outcomes, each in one short statement.
//
// Claim takes up to a batch of due rows in (created_at, id) order with
// FOR UPDATE SKIP LOCKED, stamps each with locked_until (the database's
// now() plus the Lease) and a fresh lease_token, and commits at once: no
// transaction stays open while the rows are delivered. A row whose lease has
// expired (its worker died, froze or lost the database) is claimable again.
//
// Record writes many outcomes in one statement, atomic per row and for the
// whole call: the mark, the retry row and the dead letter of a row commit
// together or not at all. Each outcome is fenced by its lease token: a row
// whose lease was taken over by another worker is left alone, and Record
// reports it as lost. This is the at-least-once guarantee: a row is marked
// processed only after its completed HTTP attempt, by the worker that still
// holds it.
package claimer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BatchSizeDefault is the default maximum number of rows per claim.
const BatchSizeDefault = 10

// LeaseDefault is how long a claim holds its rows when Config.Lease is 0.
const LeaseDefault = 30 * time.Second

// claimSQL walks the partial index webhook_outbox_pending_idx in the
// documented order, skipping rows another worker holds (a live lease, or
// the row lock of a claim in progress) and rows of the endpoints this worker
// has at their concurrency cap ($3, and $4 for the WEBHOOK_URL endpoint).
// reclaimed is true for a row whose previous lease expired without an
// outcome or a release; reclaims saturates at the integer's end rather
// than fail the claim. The redundant "id = ANY(ARRAY(…))" gives the
// planner an index condition on the primary key: without it, the generic
// plan of the prepared statement (which assumes LIMIT $1 is a tenth of the
// pending rows) joins through a sequential scan of the whole table,
// processed rows included.
//
// Fan-out, in the same statement: an event row (endpoint_id NULL, fanout
// NULL) gets one delivery row per enabled endpoint subscribed to its type,
// due at once with the event's created_at, and a delivery id derived from
// the event's and the endpoint's; its fanout becomes the number of
// deliveries made; each delivery carries the event's headers. With a
// WEBHOOK_URL endpoint ($5) the event row itself is that endpoint's
// delivery, leased and returned (or left pending when that endpoint is at
// its cap, $4); without one it is marked processed (fanout 0: unrouted). All
// of it commits together or not at all, so an event is never fanned out
// twice or half.
//
// A rotated endpoint's previous secret is returned only while its grace
// period lasts by the database clock.
const claimSQL = `WITH due AS (
  SELECT id, endpoint_id, event_type, lease_token IS NOT NULL AS reclaimed, (endpoint_id IS NULL AND fanout IS NULL) AS fan
  FROM webhook_outbox
  WHERE processed = false AND created_at <= now() AND (locked_until IS NULL OR locked_until <= now())
    AND (endpoint_id IS NULL OR endpoint_id <> ALL($3::uuid[]))
    AND NOT ($4::boolean AND endpoint_id IS NULL AND fanout IS NOT NULL)
  ORDER BY created_at, id
  LIMIT $1
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
SET locked_until = CASE WHEN due.fan AND (NOT $5::boolean OR $4::boolean) THEN NULL ELSE now() + $2 * interval '1 millisecond' END,
    lease_token = CASE WHEN due.fan AND (NOT $5::boolean OR $4::boolean) THEN NULL ELSE gen_random_uuid() END,
    reclaims = least(o.reclaims::bigint + due.reclaimed::int, 2147483647)::int,
    fanout = CASE WHEN due.fan THEN coalesce(counts.n, 0) + $5::boolean::int ELSE o.fanout END,
    processed = due.fan AND NOT $5::boolean,
    processed_at = CASE WHEN due.fan AND NOT $5::boolean THEN now() END
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

// nextDueSQL gives the milliseconds, by the database clock, until the
// earliest pending row that is not yet due (NULL when there is none).
const nextDueSQL = `SELECT (EXTRACT(EPOCH FROM (min(created_at) - clock_timestamp())) * 1000)::bigint
FROM webhook_outbox
WHERE NOT processed AND created_at > now()`

// nextDueMaxMS caps what NextDue returns: a day, in milliseconds.
const nextDueMaxMS = 24 * 60 * 60 * 1000

// Config configures a Claimer.
type Config struct {
	// Pool supplies the connections for claims and records; each holds a
	// connection only for one statement. Required.
	Pool *pgxpool.Pool
	// BatchSize is the most rows one Claim takes. Defaults to
	// BatchSizeDefault (10).
	BatchSize int
	// Lease is how long, by the database clock, a claim holds its rows:
	// longer than the worst case from the claim to the recorded outcome
	// (the request timeout plus the gates plus a margin). Defaults to
	// LeaseDefault (30s).
	Lease time.Duration
	// EnvEndpoint says the worker delivers to a WEBHOOK_URL endpoint: an
	// event's own row is then that endpoint's delivery. Without it, an
	// event is only fanned out to the endpoints of webhook_endpoints.
	EnvEndpoint bool
}

// Claimer claims batches of due rows and records their outcomes.
type Claimer struct {
	pool      *pgxpool.Pool
	batchSize int
	leaseMS   int64
	env       bool
}

// New returns a Claimer or an error naming the bad field.
func New(cfg Config) (*Claimer, error) {
	if cfg.Pool == nil {
		return nil, errors.New("claimer: Pool is required")
	}
	if cfg.BatchSize < 0 {
		return nil, fmt.Errorf("claimer: BatchSize must be positive, got %d", cfg.BatchSize)
	}
	if cfg.Lease < 0 || (cfg.Lease > 0 && cfg.Lease < time.Millisecond) {
		return nil, fmt.Errorf("claimer: Lease must be at least 1ms, got %s", cfg.Lease)
	}
	return &Claimer{
		pool:      cfg.Pool,
		batchSize: cmp.Or(cfg.BatchSize, BatchSizeDefault),
		leaseMS:   cmp.Or(cfg.Lease, LeaseDefault).Milliseconds(),
		env:       cfg.EnvEndpoint,
	}, nil
}

// Token identifies one lease of one row (a uuid). An alias, so that a Row
// converts to any struct of the same shape.
type Token = [16]byte

// Row is one claimed outbox row, held under a lease: one delivery of an
// event to one endpoint.
type Row struct {
	ID         int64
	Token      Token  // the lease; Record needs it back
	DeliveryID string // uuid text; the same on every attempt of a delivery
	EventType  string
	Payload    []byte // the JSON text, sent as the body byte for byte
	Headers    []byte // the JSON object text of extra request headers; nil for none
	Attempt    int    // 1 for the first attempt
	CreatedAt  time.Time
	Reclaimed  bool // its previous lease expired without an outcome

	// EndpointID is the uuid text of the row's endpoint in
	// webhook_endpoints; "" for the WEBHOOK_URL endpoint. The other
	// Endpoint fields are read from webhook_endpoints in the claim itself,
	// so a change is seen by the next claim.
	EndpointID     string
	EndpointName   string
	URL            string
	Secret         string
	Enabled        bool
	DisabledReason string
	RetryRPS       int // 0: WEBHOOK_RETRY_RPS
	// PreviousSecret is the secret a rotation replaced, while its grace
	// period lasts by the database clock (until PreviousUntil); "" and the
	// zero time otherwise.
	PreviousSecret string
	PreviousUntil  time.Time
}

// Query is what one Claim takes.
type Query struct {
	// Limit is the most rows; <= 0 or over BatchSize means BatchSize.
	Limit int
	// Skip lists endpoints (uuid text) whose rows the claim leaves alone:
	// those at their concurrency cap in this worker.
	Skip []string
	// SkipEnv leaves the WEBHOOK_URL endpoint's deliveries alone. Events
	// still in want of fan-out are claimed anyway.
	SkipEnv bool
}

// Batch is what one Claim returns.
type Batch struct {
	// Rows are the deliveries leased to the caller, oldest first.
	Rows []Row
	// Taken is how many rows the claim took: Rows, and the events it
	// fanned out and recorded processed at once (no WEBHOOK_URL endpoint).
	// Taken == Limit means more rows may be due.
	Taken int
	// FannedOut is how many events the claim fanned out; Deliveries how
	// many endpoint delivery rows that made. Those rows are due at once and
	// were not claimed by this call.
	FannedOut, Deliveries int
	// Unrouted lists the event types of events the claim found no endpoint
	// for: they are recorded processed with fanout 0.
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

// Claim leases due rows (see Query), fanning out the events among them, in
// one statement and one round trip. It returns an empty Batch and no error
// when nothing is due.
func (c *Claimer) Claim(ctx context.Context, q Query) (Batch, error) {
	limit := q.Limit
	if limit <= 0 || limit > c.batchSize {
		limit = c.batchSize
	}
	skip := q.Skip
	if skip == nil {
		skip = []string{}
	}
	rows, err := c.pool.Query(ctx, claimSQL, limit, c.leaseMS, skip, q.SkipEnv, c.env)
	if err != nil {
		return Batch{}, fmt.Errorf("claim: %w", err)
	}
	var b Batch
	var r Row
	var leased, fan bool
	var fanout int
	var createdAt, prevUntil pgtype.Timestamptz
	var brokenTokens []Token
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Token, &r.DeliveryID, &r.EventType, &r.Payload, &r.Headers, &r.Attempt, &createdAt, &r.Reclaimed,
		&r.EndpointID, &r.EndpointName, &r.URL, &r.Secret, &r.Enabled, &r.DisabledReason, &r.RetryRPS,
		&r.PreviousSecret, &prevUntil, &leased, &fan, &fanout, &b.Endpoints}, func() error {
		b.Taken++
		if fan {
			b.FannedOut++
			b.Deliveries += fanout
			if c.env {
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
		// Its batch mates are leased already and go on; a failure here
		// leaves the broken rows leased, to be tried again when the lease
		// ends.
		b.BrokenErr = c.deadLetterBroken(ctx, b.Broken, brokenTokens)
	}
	// UPDATE … RETURNING has no order of its own.
	slices.SortFunc(b.Rows, func(a, b Row) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return b, nil
}

// decodeTimes sets r's times from the claim's, or says why the worker
// cannot handle them. A previous secret's end out of range ends its grace
// period at once.
func decodeTimes(r *Row, createdAt, prevUntil pgtype.Timestamptz) error {
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
// scheduled (not yet due) pending row is due; ok is false when there is none.
func (c *Claimer) NextDue(ctx context.Context) (d time.Duration, ok bool, err error) {
	var ms *int64
	if err := c.pool.QueryRow(ctx, nextDueSQL).Scan(&ms); err != nil {
		return 0, false, fmt.Errorf("next due: %w", err)
	}
	if ms == nil {
		return 0, false, nil
	}
	// A row due centuries from now would overflow a Duration: a day is as
	// good, the dispatcher asks again long before.
	return time.Duration(min(max(*ms, 0), nextDueMaxMS)) * time.Millisecond, true, nil
}
