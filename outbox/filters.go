package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

var (
	checkFilterSQL     = rawStatement("check_filter")
	endpointFiltersSQL = rawStatement("endpoint_filters")
)

// filterCheck is the row of check_filter.
type filterCheck struct {
	Filter  string  `db:"filter"`
	Problem *string `db:"problem"`
}

// filterRow is a row of endpoint_filters.
type filterRow struct {
	Name   string `db:"name"`
	Filter string `db:"filter"`
}

// CheckFilter reads expr as an endpoint's payload filter (migration 030):
// its text as stored, and why it may not be stored ("" when it may). Text
// that is not jsonpath returns PostgreSQL's error (a *pgconn.PgError).
func (s *Store) CheckFilter(ctx context.Context, expr string) (stored, problem string, err error) {
	c, err := queryOne[filterCheck](ctx, s.pool, checkFilterSQL, pgx.NamedArgs{"payload_filter": expr})
	if err != nil {
		return "", "", err
	}
	if c.Problem != nil {
		problem = *c.Problem
	}
	return c.Filter, problem, nil
}

// EndpointFilters returns every endpoint's payload filter by name, as
// stored; an endpoint without one is not in the map.
func (s *Store) EndpointFilters(ctx context.Context) (map[string]string, error) {
	rows, err := queryAll[filterRow](ctx, s.pool, endpointFiltersSQL, nil)
	if err != nil {
		return nil, fmt.Errorf("endpoint filters: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.Name] = r.Filter
	}
	return out, nil
}
