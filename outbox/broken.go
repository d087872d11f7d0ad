package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fluxora/webhook-worker/webhook"
)

// The times the worker can handle: those the schema allows (migration 009,
// webhook_time_ok), finite, from MinTime to before MaxTime.
var (
	MinTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// timeOf decodes a timestamp the claim returned, or says why the worker
// cannot handle it (the schema refuses such times; this is the second line
// of defence, for a database whose constraints were dropped or not yet
// validated).
func timeOf(col string, ts pgtype.Timestamptz) (time.Time, error) {
	switch {
	case !ts.Valid:
		return time.Time{}, nil
	case ts.InfinityModifier == pgtype.Infinity:
		return time.Time{}, fmt.Errorf("%s is infinity", col)
	case ts.InfinityModifier == pgtype.NegativeInfinity:
		return time.Time{}, fmt.Errorf("%s is -infinity", col)
	case ts.Time.Before(MinTime) || !ts.Time.Before(MaxTime):
		return time.Time{}, fmt.Errorf("%s %s is out of range", col, ts.Time.UTC().Format("2006-01-02 15:04:05Z07:00"))
	}
	return ts.Time, nil
}

// deadLetterBrokenSQL moves rows the worker could not decode to the dead
// letter, each with its reason, where the caller's lease still holds them
// (the fence): one statement, so the mark and the dead letter commit
// together. $1 is a JSON array of {"id", "token", "reason"}. created_at is
// brought into the schema's range, so that the mark passes the time
// constraints of migration 009 should they not be validated yet.
const deadLetterBrokenSQL = `WITH broken AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS b(id bigint, token uuid, reason text)
), moved AS (
  UPDATE webhook_outbox o
  SET processed = true, processed_at = now(), locked_until = NULL, created_at = webhook_time_clamp(o.created_at)
  FROM broken b
  WHERE o.id = b.id AND o.lease_token = b.token AND NOT o.processed
  RETURNING o.delivery_id, o.event_type, o.payload, o.attempt, o.endpoint_id, o.headers, b.reason, o.ordering_key, o.ordering_seq
)
INSERT INTO webhook_dead_letter (` + deadLetterColumns + `)
SELECT delivery_id, event_type, payload, headers, endpoint_id, attempt - 1, NULL, left(reason, 512),
  ordering_key, ordering_seq, ordering_key IS NOT NULL FROM moved`

// deadLetterBroken moves the broken rows, leased under their tokens, to the
// dead letter.
func (s *Store) deadLetterBroken(ctx context.Context, broken []webhook.Broken, tokens []webhook.Token) error {
	type item struct {
		ID     int64       `json:"id"`
		Token  pgtype.UUID `json:"token"`
		Reason string      `json:"reason"`
	}
	items := make([]item, len(broken))
	for i, b := range broken {
		items[i] = item{ID: b.ID, Token: pgtype.UUID{Bytes: tokens[i], Valid: true}, Reason: b.Reason}
	}
	arg, err := json.Marshal(items)
	if err != nil {
		return fmt.Errorf("dead-letter undecodable rows: %w", err)
	}
	_, err = retryMoved(ctx, func() (pgconn.CommandTag, error) { return s.pool.Exec(ctx, deadLetterBrokenSQL, string(arg)) })
	if err != nil {
		return fmt.Errorf("dead-letter undecodable rows: %w", err)
	}
	return nil
}
