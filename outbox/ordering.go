package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// laneRowsSQL are the pending rows waiting behind the head of their lane
// (held, migration 015), through webhook_outbox_lane_idx.
const laneRowsSQL = `SELECT * FROM webhook_outbox w
  WHERE NOT w.processed AND w.ordering_key IS NOT NULL AND (w.endpoint_id IS NOT NULL OR w.fanout IS NOT NULL) AND w.held`

// BlockedKeysSQL lists, by endpoint (endpoint_id NULL: the WEBHOOK_URL
// endpoint), the keys that are blocked: rows wait behind a head that cannot
// go now (its retry is scheduled later, or it was dead-lettered and the
// endpoint holds its keys), or a dead letter holds the key. since is when
// the oldest of them began to wait (the oldest waiting row's created_at, or
// the holding dead letter's death). One probe of a lane's head per lane
// with waiting rows; a lane whose head is due or in flight is not blocked.
const BlockedKeysSQL = `WITH waiting AS (
  SELECT w.endpoint_id, w.ordering_key, min(w.created_at) AS since FROM (` + laneRowsSQL + `) w
  GROUP BY 1, 2
), stuck AS (
  SELECT w.* FROM waiting w
  WHERE w.endpoint_id IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM webhook_outbox h
      WHERE NOT h.processed AND h.ordering_key = w.ordering_key AND h.endpoint_id = w.endpoint_id AND NOT h.held
        AND (h.created_at <= now() OR h.locked_until > now()))
  UNION ALL
  SELECT w.* FROM waiting w
  WHERE w.endpoint_id IS NULL AND NOT EXISTS (
      SELECT 1 FROM webhook_outbox h
      WHERE NOT h.processed AND h.ordering_key = w.ordering_key AND h.endpoint_id IS NULL AND h.fanout IS NOT NULL AND NOT h.held
        AND (h.created_at <= now() OR h.locked_until > now()))
  UNION ALL
  SELECT d.endpoint_id, d.ordering_key, min(d.died_at) FROM webhook_dead_letter d
  WHERE d.ordering_key IS NOT NULL AND NOT d.order_broken AND NOT d.fan_out
  GROUP BY 1, 2
), lanes AS (
  SELECT endpoint_id, ordering_key, min(since) AS since FROM stuck GROUP BY 1, 2
)
SELECT coalesce(e.name, CASE WHEN l.endpoint_id IS NULL THEN '` + DefaultEndpointName + `' ELSE '' END),
  count(*), coalesce(EXTRACT(EPOCH FROM now() - min(webhook_time_clamp(l.since))), 0)::float8
FROM lanes l LEFT JOIN webhook_endpoints e ON e.id = l.endpoint_id
GROUP BY 1 ORDER BY 1`

// BlockedKeys is one endpoint's blocked keys (BlockedKeysSQL).
type BlockedKeys struct {
	// Endpoint is the endpoint's name (DefaultEndpointName for the
	// WEBHOOK_URL one; "" for a removed one).
	Endpoint string `json:"endpoint"`
	// Keys is how many keys are blocked.
	Keys int64 `json:"keys"`
	// OldestSecs is how long the longest blocked of them has waited, in
	// seconds.
	OldestSecs float64 `json:"oldest_seconds"`
}

// BlockedKeys reads the blocked keys by endpoint name; none: an empty,
// non-nil list.
func (s *Store) BlockedKeys(ctx context.Context) ([]BlockedKeys, error) {
	rows, err := s.pool.Query(ctx, BlockedKeysSQL)
	if err != nil {
		return nil, fmt.Errorf("blocked keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[BlockedKeys])
	if err != nil {
		return nil, fmt.Errorf("blocked keys: %w", err)
	}
	if out == nil {
		out = []BlockedKeys{}
	}
	return out, nil
}
