// Package claimer claims due outbox rows with FOR UPDATE SKIP LOCKED and
// records their outcomes in the same transaction.
//
// A Batch holds its transaction (and so its pooled connection and row locks)
// while the caller delivers the rows over HTTP. Complete writes every outcome
// and commits in one round trip; if the process dies first, PostgreSQL
// releases the locks and the rows stay pending for another worker. This is
// the at-least-once guarantee: a row is marked processed only by the commit
// that follows its completed HTTP attempt.
package claimer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BatchSizeDefault is the default maximum number of rows per claim.
const BatchSizeDefault = 10

// The claim statement is the documented guarantee, to the letter. It walks
// the partial index webhook_outbox_pending_idx.
const claimSQL = `SELECT id, delivery_id::text, event_type, payload::text, attempt, created_at
FROM webhook_outbox
WHERE processed = false AND created_at <= now()
ORDER BY created_at, id
LIMIT $1
FOR UPDATE SKIP LOCKED`

// nextDueSQL gives the milliseconds, by the database clock, until the
// earliest pending row that is not yet due (NULL when there is none).
const nextDueSQL = `SELECT (EXTRACT(EPOCH FROM (min(created_at) - clock_timestamp())) * 1000)::bigint
FROM webhook_outbox
WHERE NOT processed AND created_at > now()`

// Config configures a Claimer.
type Config struct {
	// Pool supplies the connections that hold claim transactions. Required.
	// Size it for the number of batches in flight plus one.
	Pool *pgxpool.Pool
	// BatchSize is the most rows one Claim takes. Defaults to
	// BatchSizeDefault (10).
	BatchSize int
}

// Claimer claims batches of due rows.
type Claimer struct {
	pool      *pgxpool.Pool
	batchSize int
}

// New returns a Claimer or an error naming the bad field.
func New(cfg Config) (*Claimer, error) {
	if cfg.Pool == nil {
		return nil, errors.New("claimer: Pool is required")
	}
	if cfg.BatchSize < 0 {
		return nil, fmt.Errorf("claimer: BatchSize must be positive, got %d", cfg.BatchSize)
	}
	return &Claimer{pool: cfg.Pool, batchSize: cmp.Or(cfg.BatchSize, BatchSizeDefault)}, nil
}

// Row is one claimed outbox row.
type Row struct {
	ID         int64
	DeliveryID string // uuid text; the same on every attempt of an event
	EventType  string
	Payload    []byte // the JSON text, sent as the body byte for byte
	Attempt    int    // 1 for the first attempt
	CreatedAt  time.Time
}

// Claim begins a transaction and locks up to limit due rows (at most
// BatchSize; limit <= 0 means BatchSize). It returns (nil, nil) when nothing
// is due; otherwise the caller must call Complete or Abort on the batch.
// BEGIN and the claim travel in one round trip.
func (c *Claimer) Claim(ctx context.Context, limit int) (*Batch, error) {
	if limit <= 0 || limit > c.batchSize {
		limit = c.batchSize
	}
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim: acquire: %w", err)
	}
	b := &Batch{conn: conn}
	rows, err := b.claim(ctx, limit)
	if err != nil {
		b.Abort()
		return nil, fmt.Errorf("claim: %w", err)
	}
	if len(rows) == 0 {
		b.Abort()
		return nil, nil
	}
	b.Rows = rows
	return b, nil
}

func (b *Batch) claim(ctx context.Context, limit int) ([]Row, error) {
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	batch.Queue(claimSQL, limit)
	br := b.conn.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out := make([]Row, 0, limit)
	var r Row
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.DeliveryID, &r.EventType, &r.Payload, &r.Attempt, &r.CreatedAt}, func() error {
		out = append(out, r)
		r.Payload = nil // the next row scans into a fresh slice
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, br.Close()
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
