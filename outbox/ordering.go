package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// laneRowsSQL are the pending rows waiting behind the head of their lane
// (held, migration 015), through webhook_outbox_lane_idx. Only status.go
// still splices it; blocked_keys writes it out.
const laneRowsSQL = `SELECT * FROM webhook_outbox w
  WHERE NOT w.processed AND w.ordering_key IS NOT NULL AND (w.endpoint_id IS NOT NULL OR w.fanout IS NOT NULL) AND w.held`

// blockedKeysSQL is the statement blocked_keys (queries/ordering.sql).
var blockedKeysSQL = rawStatement("blocked_keys")

// BlockedKeys is one endpoint's blocked keys (blocked_keys).
type BlockedKeys struct {
	// Endpoint is the endpoint's name (DefaultEndpointName for the
	// WEBHOOK_URL one; "" for a removed one).
	Endpoint string `json:"endpoint" db:"endpoint"`
	// Keys is how many keys are blocked.
	Keys int64 `json:"keys" db:"keys"`
	// OldestSecs is how long the longest blocked of them has waited, in
	// seconds.
	OldestSecs float64 `json:"oldest_seconds" db:"oldest_seconds"`
}

// BlockedKeys reads the blocked keys by endpoint name; none: an empty,
// non-nil list.
func (s *Store) BlockedKeys(ctx context.Context) ([]BlockedKeys, error) {
	rows, err := s.pool.Query(ctx, blockedKeysSQL, pgx.NamedArgs{"default_endpoint": DefaultEndpointName})
	if err != nil {
		return nil, fmt.Errorf("blocked keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[BlockedKeys])
	if err != nil {
		return nil, fmt.Errorf("blocked keys: %w", err)
	}
	if out == nil {
		out = []BlockedKeys{}
	}
	return out, nil
}
