package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

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
