package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A replay's statements (queries/replay.sql).
var (
	replayMissingSQL = rawStatement("replay_missing")
	replayBlockedSQL = rawStatement("replay_blocked")
	replaySQL        = rawStatement("replay")
)

// ReplayFilter selects the dead letters Replay sends again.
type ReplayFilter struct {
	// IDs are delivery ids (uuid text): all of them are replayed or none.
	// Empty: every dead letter matching the rest.
	IDs []string
	// EventType keeps those of this event type; "": any.
	EventType string
	// Since keeps those that died at or after it; nil: any.
	Since *time.Time
	// Until keeps those that died before it; nil: any.
	Until *time.Time
	// Endpoint keeps those of the endpoint of this name
	// (DefaultEndpointName: the WEBHOOK_URL one); "": any.
	Endpoint string
}

// Blocked is the dead letters of one endpoint a replay cannot send: the
// endpoint is disabled, or removed (Name "").
type Blocked struct {
	EndpointID string `db:"endpoint_id"`
	Name       string `db:"name"`
	Count      int64  `db:"count"`
}

// Replayed is what Replay did.
type Replayed struct {
	// Count is how many dead letters went back to the outbox.
	Count int64
	// Blocked are the dead letters of the selection left behind, by
	// endpoint, those of disabled endpoints first by name.
	Blocked []Blocked
	// Missing are the IDs given that are not in the dead letter table.
	Missing []string
}

// Replay moves the dead letters f selects back to the outbox (replay),
// in one transaction. Given IDs, it replays all of them or none: nothing
// when one is Missing or Blocked. Otherwise the Blocked ones stay and the
// others go back.
func (s *Store) Replay(ctx context.Context, f ReplayFilter) (Replayed, error) {
	args, err := s.endpointArgs(ctx, f.Endpoint)
	if err != nil {
		return Replayed{}, err
	}
	args["ids"], args["event_type"], args["since"], args["until"] = nil, f.EventType, timeArg(f.Since), timeArg(f.Until)
	if len(f.IDs) > 0 {
		args["ids"] = f.IDs
	}
	// A replay into ordered lanes may wait on a worker's lock of a lane
	// (migration 015); refused for it, the whole transaction runs again.
	r, err := retryMoved(ctx, func() (Replayed, error) { return s.replay(ctx, f, args) })
	if err != nil {
		return Replayed{}, err
	}
	return r, nil
}

// replay is one run of Replay's transaction.
func (s *Store) replay(ctx context.Context, f ReplayFilter, args pgx.NamedArgs) (Replayed, error) {
	var r Replayed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(f.IDs) > 0 {
			if err := tx.QueryRow(ctx, replayMissingSQL, pgx.NamedArgs{"ids": f.IDs}).Scan(&r.Missing); err != nil || len(r.Missing) > 0 {
				return err
			}
		}
		blocked, err := queryAll[Blocked](ctx, tx, replayBlockedSQL, args)
		if err != nil {
			return err
		}
		if len(blocked) > 0 {
			r.Blocked = blocked // nil when none
			if len(f.IDs) > 0 {
				return nil
			}
		}
		tag, err := tx.Exec(ctx, replaySQL, args)
		r.Count = tag.RowsAffected()
		return err
	})
	if err != nil {
		return Replayed{}, fmt.Errorf("replay dead letters: %w", err)
	}
	return r, nil
}

// timeArg is an optional time as a statement's parameter: NULL for nil.
func timeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}
