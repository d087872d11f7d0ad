package claimer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Kind says what becomes of a claimed row.
type Kind int

const (
	// Done marks the row processed: it was delivered.
	Done Kind = iota + 1
	// Retry marks the row processed and inserts its next attempt, due later.
	Retry
	// Defer marks the row processed and re-inserts the same attempt, due
	// later (a gate refused it; no attempt was spent).
	Defer
	// Dead marks the row processed and moves the event to
	// webhook_dead_letter.
	Dead
)

// Outcome is what Complete records for one row.
type Outcome struct {
	Kind Kind
	// Attempt is the attempt number of the new row (Retry, Defer), or the
	// number of attempts made (Dead).
	Attempt int
	// Delay is how long after the commit, by the database clock, the new row
	// is due (Retry, Defer).
	Delay time.Duration
	// Status is the last HTTP status (Dead); 0 is stored as NULL.
	Status int
	// Error is the last error text (Dead).
	Error string
}

const markSQL = `UPDATE webhook_outbox SET processed = true, processed_at = now() WHERE id = ANY($1)`

// The new attempt copies the event from the claimed row, so the payload does
// not travel back to the server.
const requeueSQL = `INSERT INTO webhook_outbox (delivery_id, event_type, payload, attempt, created_at)
SELECT o.delivery_id, o.event_type, o.payload, r.attempt, clock_timestamp() + r.delay_ms * interval '1 millisecond'
FROM unnest($1::bigint[], $2::int[], $3::bigint[]) AS r(id, attempt, delay_ms)
JOIN webhook_outbox o ON o.id = r.id`

const deadSQL = `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error)
SELECT o.delivery_id, o.event_type, o.payload, r.attempts, NULLIF(r.status, 0), r.error
FROM unnest($1::bigint[], $2::int[], $3::int[], $4::text[]) AS r(id, attempts, status, error)
JOIN webhook_outbox o ON o.id = r.id`

// Batch is a claimed set of rows inside an open transaction.
type Batch struct {
	// Rows are the claimed rows, oldest first.
	Rows []Row
	conn *pgxpool.Conn
}

// Complete records outcomes (one per row, in Rows order) and commits, all in
// one round trip. On error the transaction is rolled back and every row stays
// pending. The batch is finished either way.
func (b *Batch) Complete(ctx context.Context, outcomes []Outcome) error {
	if len(outcomes) != len(b.Rows) {
		b.Abort()
		return fmt.Errorf("complete: %d outcomes for %d rows", len(outcomes), len(b.Rows))
	}
	batch := b.writeBack(outcomes)
	batch.Queue("COMMIT")
	br := b.conn.SendBatch(ctx, batch)
	var err error
	for range batch.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Abort()
		return fmt.Errorf("complete: %w", err)
	}
	b.release()
	return nil
}

func (b *Batch) writeBack(outcomes []Outcome) *pgx.Batch {
	ids := make([]int64, len(b.Rows))
	var re struct {
		ids, delays []int64
		attempts    []int32
	}
	var dead struct {
		ids              []int64
		attempts, status []int32
		errs             []string
	}
	for i, o := range outcomes {
		id := b.Rows[i].ID
		ids[i] = id
		switch o.Kind {
		case Retry, Defer:
			re.ids = append(re.ids, id)
			re.attempts = append(re.attempts, int32(o.Attempt))
			re.delays = append(re.delays, o.Delay.Milliseconds())
		case Dead:
			dead.ids = append(dead.ids, id)
			dead.attempts = append(dead.attempts, int32(o.Attempt))
			dead.status = append(dead.status, int32(o.Status))
			dead.errs = append(dead.errs, o.Error)
		}
	}
	batch := &pgx.Batch{}
	batch.Queue(markSQL, ids)
	if len(re.ids) > 0 {
		batch.Queue(requeueSQL, re.ids, re.attempts, re.delays)
	}
	if len(dead.ids) > 0 {
		batch.Queue(deadSQL, dead.ids, dead.attempts, dead.status, dead.errs)
	}
	return batch
}

// Abort rolls the transaction back (best effort) and releases the
// connection; the rows stay pending. Safe to call more than once.
func (b *Batch) Abort() {
	if b.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.conn.Exec(ctx, "ROLLBACK"); err != nil {
		// The pool discards a connection that is still in a transaction.
		_ = b.conn.Conn().Close(ctx)
	}
	b.release()
}

func (b *Batch) release() {
	if b.conn != nil {
		b.conn.Release()
		b.conn = nil
	}
}
