package endpoints

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// checkFilter checks expr as a payload filter (migration 030) with the
// database, whose jsonpath it is: PostgreSQL's message for text that is
// not jsonpath, webhook_filter_problem's for one that may not be stored,
// each as a *FieldError on "filter". "" (no filter) is not checked. It
// returns the filter as it will be stored.
func (s *Store) checkFilter(ctx context.Context, expr string) (string, error) {
	if strings.TrimSpace(expr) == "" {
		return "", nil
	}
	stored, problem, err := s.db.CheckFilter(ctx, expr)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && (pe.Code == "42601" || strings.HasPrefix(pe.Code, "22")):
		return "", invalid("filter", "%s", pe.Message)
	case err != nil:
		return "", err
	case problem != "":
		return "", invalid("filter", "%s", problem)
	}
	return stored, nil
}

// Filters returns every endpoint's payload filter by name, as stored; an
// endpoint without one is not in the map.
func (s *Store) Filters(ctx context.Context) (map[string]string, error) {
	return s.db.EndpointFilters(ctx)
}
