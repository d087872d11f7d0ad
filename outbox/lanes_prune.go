package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pruneLanesSQL is the statement prune_lanes (queries/lanes.sql).
var pruneLanesSQL = rawStatement("prune_lanes")

// LaneCursor is where a walk of the ordering lanes stands: the last lane
// looked at, by endpoint id and key. The zero LaneCursor is before the
// first lane.
type LaneCursor struct {
	Endpoint string // a uuid; "" before the first lane
	Key      string
}

// prunedRow is prune_lanes's result.
type prunedRow struct {
	Got          bool    `db:"got"`
	Removed      int64   `db:"removed"`
	LastEndpoint *string `db:"last_endpoint"`
	LastKey      *string `db:"last_key"`
}

// PruneLanes looks at the next limit ordering lanes after from and removes
// those untouched for idle with nothing pending and no dead letter holding
// them, their last sequences kept in their floors (prune_lanes), under the
// advisory lock lockKey. It returns how many it removed and where the walk
// stands: the zero LaneCursor once it passed the last lane. got is false,
// and nothing is done, when another session holds the lock.
func (s *Store) PruneLanes(ctx context.Context, from LaneCursor, idle time.Duration, limit int, lockKey int64) (removed int64, next LaneCursor, got bool, err error) {
	args := pgx.NamedArgs{"idle_ms": idle.Milliseconds(), "limit": limit, "lock_key": lockKey, "after_endpoint": nil, "after_key": nil}
	if from.Endpoint != "" {
		args["after_endpoint"], args["after_key"] = from.Endpoint, from.Key
	}
	r, err := queryOne[prunedRow](ctx, s.pool, pruneLanesSQL, args)
	if err != nil {
		return 0, from, false, fmt.Errorf("prune ordering lanes: %w", err)
	}
	if !r.Got {
		return 0, from, false, nil
	}
	if r.LastEndpoint != nil && r.LastKey != nil {
		next = LaneCursor{Endpoint: *r.LastEndpoint, Key: *r.LastKey}
	}
	return r.Removed, next, r.Got, nil
}
