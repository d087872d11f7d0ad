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
	"github.com/jackc/pgx/v5/pgxpool"
)

// BatchSizeDefault is the default maximum number of rows per claim.
const BatchSizeDefault = 10

// LeaseDefault is how long a claim holds its rows when Config.Lease is 0.
const LeaseDefault = 30 * time.Second

// claimSQL walks the partial index webhook_outbox_pending_idx in the
// documented order, skipping rows another worker holds (a live lease, or
// the row lock of a claim in progress). reclaimed is true for a row whose
// previous lease expired without an outcome or a release. The redundant
// "id = ANY(ARRAY(…))" gives the planner an index condition on the primary
// key: without it, the generic plan of the prepared statement (which
// assumes LIMIT $1 is a tenth of the pending rows) joins through a
// sequential scan of the whole table, processed rows included.
const claimSQL = `WITH due AS (
  SELECT id, lease_token IS NOT NULL AS reclaimed
  FROM webhook_outbox
  WHERE processed = false AND created_at <= now() AND (locked_until IS NULL OR locked_until <= now())
  ORDER BY created_at, id
  LIMIT $1
  FOR UPDATE SKIP LOCKED
)
UPDATE webhook_outbox o
SET locked_until = now() + $2 * interval '1 millisecond', lease_token = gen_random_uuid(),
    reclaims = o.reclaims + due.reclaimed::int
FROM due
WHERE o.id = ANY(ARRAY(SELECT id FROM due)) AND o.id = due.id
RETURNING o.id, o.lease_token, o.delivery_id::text, o.event_type, o.payload::text, o.attempt, o.created_at, due.reclaimed`

// nextDueSQL gives the milliseconds, by the database clock, until the
// earliest pending row that is not yet due (NULL when there is none).
const nextDueSQL = `SELECT (EXTRACT(EPOCH FROM (min(created_at) - clock_timestamp())) * 1000)::bigint
FROM webhook_outbox
WHERE NOT processed AND created_at > now()`

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
}

// Claimer claims batches of due rows and records their outcomes.
type Claimer struct {
	pool      *pgxpool.Pool
	batchSize int
	leaseMS   int64
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
	}, nil
}

// Token identifies one lease of one row (a uuid). An alias, so that a Row
// converts to any struct of the same shape.
type Token = [16]byte

// Row is one claimed outbox row, held under a lease.
type Row struct {
	ID         int64
	Token      Token  // the lease; Record needs it back
	DeliveryID string // uuid text; the same on every attempt of an event
	EventType  string
	Payload    []byte // the JSON text, sent as the body byte for byte
	Attempt    int    // 1 for the first attempt
	CreatedAt  time.Time
	Reclaimed  bool // its previous lease expired without an outcome
}

// Claim leases up to limit due rows (at most BatchSize; limit <= 0 means
// BatchSize), oldest first, in one statement and one round trip. It returns
// no rows and no error when nothing is due.
func (c *Claimer) Claim(ctx context.Context, limit int) ([]Row, error) {
	if limit <= 0 || limit > c.batchSize {
		limit = c.batchSize
	}
	rows, err := c.pool.Query(ctx, claimSQL, limit, c.leaseMS)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	var out []Row
	var r Row
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Token, &r.DeliveryID, &r.EventType, &r.Payload, &r.Attempt, &r.CreatedAt, &r.Reclaimed}, func() error {
		out = append(out, r)
		r.Payload = nil // the next row scans into a fresh slice
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	// UPDATE … RETURNING has no order of its own.
	slices.SortFunc(out, func(a, b Row) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
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
	return time.Duration(max(*ms, 0)) * time.Millisecond, true, nil
}
