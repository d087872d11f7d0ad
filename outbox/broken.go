package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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

// deadLetterBrokenSQL is the statement dead_letter_broken
// (queries/broken.sql).
var deadLetterBrokenSQL = rawStatement("dead_letter_broken")

// deadLetterBroken moves the broken rows, leased under their tokens, to the
// dead letter (dead_letter_broken).
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
	_, err = retryMoved(ctx, func() (pgconn.CommandTag, error) {
		return s.pool.Exec(ctx, deadLetterBrokenSQL, pgx.NamedArgs{"broken": string(arg)})
	})
	if err != nil {
		return fmt.Errorf("dead-letter undecodable rows: %w", err)
	}
	return nil
}
