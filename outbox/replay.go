package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReplayFilterSQL selects the dead letters d a replay is about: the
// delivery ids @ids (NULL for all), the event type @event_type ("" for
// any), died at or after @since and before @until (NULL for either: no
// bound), of the endpoint (endpointFilterSQL).
const ReplayFilterSQL = `(@ids::uuid[] IS NULL OR d.delivery_id = ANY(@ids::uuid[]))
    AND (@event_type::text = '' OR d.event_type = @event_type::text)
    AND (@since::timestamptz IS NULL OR d.died_at >= @since::timestamptz)
    AND (@until::timestamptz IS NULL OR d.died_at < @until::timestamptz)
    AND ` + endpointFilterSQL

// ReplaySQL moves dead letters back to the outbox in one statement: a
// replay can never lose or duplicate an entry. Each goes back, as a fresh
// attempt 1 with the same delivery id, to its own endpoint: a targeted row
// for an endpoint of the table; for the WEBHOOK_URL endpoint, an event row
// with fanout 1 ("already fanned out"), which only that endpoint receives
// (fanout NULL would fan the event out to every endpoint again), unless it
// died before its fan-out (fan_out, migration 009): it is then fanned out
// again, as a new event (fanout NULL). Dead letters of a disabled or
// removed endpoint stay.
const ReplaySQL = `WITH moved AS (
  DELETE FROM webhook_dead_letter d
  WHERE ` + ReplayFilterSQL + `
    AND (d.endpoint_id IS NULL OR EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.enabled))
  RETURNING d.delivery_id, d.event_type, d.payload, d.endpoint_id, d.headers, d.fan_out, d.ordering_key, d.ordering_seq)
INSERT INTO webhook_outbox (delivery_id, event_type, payload, endpoint_id, fanout, headers, ordering_key, ordering_seq)
SELECT delivery_id, event_type, payload, endpoint_id, CASE WHEN endpoint_id IS NULL AND NOT fan_out THEN 1 END, headers,
  ordering_key, CASE WHEN NOT fan_out THEN ordering_seq END
FROM moved ORDER BY coalesce(endpoint_id, webhook_ordering_nil()), ordering_key, ordering_seq`

// BlockedSQL counts the dead letters of the same selection that ReplaySQL
// leaves, by endpoint; the name is empty when the endpoint was removed.
const BlockedSQL = `SELECT d.endpoint_id::text, coalesce(e.name, ''), count(*)
FROM webhook_dead_letter d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE ` + ReplayFilterSQL + `
  AND d.endpoint_id IS NOT NULL AND (e.id IS NULL OR NOT e.enabled)
GROUP BY 1, 2 ORDER BY 2, 1`

// missingSQL lists the delivery ids of @ids that are not in the dead
// letter table.
const missingSQL = `SELECT coalesce(array_agg(i::text), '{}') FROM unnest(@ids::uuid[]) i
WHERE NOT EXISTS (SELECT 1 FROM webhook_dead_letter d WHERE d.delivery_id = i)`

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
	EndpointID string
	Name       string
	Count      int64
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

// Replay moves the dead letters f selects back to the outbox (ReplaySQL),
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
			if err := tx.QueryRow(ctx, missingSQL, pgx.NamedArgs{"ids": f.IDs}).Scan(&r.Missing); err != nil || len(r.Missing) > 0 {
				return err
			}
		}
		rows, err := tx.Query(ctx, BlockedSQL, args)
		if err != nil {
			return err
		}
		var b Blocked
		if _, err := pgx.ForEachRow(rows, []any{&b.EndpointID, &b.Name, &b.Count}, func() error {
			r.Blocked = append(r.Blocked, b)
			return nil
		}); err != nil || (len(f.IDs) > 0 && len(r.Blocked) > 0) {
			return err
		}
		tag, err := tx.Exec(ctx, ReplaySQL, args)
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
