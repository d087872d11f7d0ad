package endpoints

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

var (
	// ErrNotFound: no endpoint has the name (or id) given. The error
	// returned wraps it and names the endpoint.
	ErrNotFound = errors.New("no such endpoint")
	// ErrExists: Add was given the name of an existing endpoint.
	ErrExists = errors.New("endpoint already exists")
	// ErrPending: Remove without force found pending deliveries; the error
	// returned wraps it and gives their number.
	ErrPending = errors.New("endpoint has pending deliveries")
)

// nameError is ErrNotFound or ErrExists about one endpoint.
type nameError struct {
	name string
	err  error
}

func (e *nameError) Error() string {
	if e.err == ErrExists {
		return fmt.Sprintf("endpoint %q already exists", e.name)
	}
	return fmt.Sprintf("no endpoint named %q", e.name)
}

func (e *nameError) Unwrap() error { return e.err }

func notFound(name string) error { return &nameError{name: name, err: ErrNotFound} }

// pendingError is ErrPending with the count.
type pendingError struct {
	name string
	n    int64
}

func (e *pendingError) Error() string {
	return fmt.Sprintf("endpoint %q has %d pending deliveries: nothing removed (--force dead-letters them and removes it)", e.name, e.n)
}

func (e *pendingError) Unwrap() error { return ErrPending }

// constraintFields maps the table's checks to the names of FieldError.
var constraintFields = map[string]string{
	"webhook_endpoints_name_valid":           "name",
	"webhook_endpoints_url_valid":            "url",
	"webhook_endpoints_secret_not_empty":     "secret",
	"webhook_endpoints_event_types_valid":    "events",
	"webhook_endpoints_retry_rps_positive":   "retry-rps",
	"webhook_endpoints_ordering_valid":       "ordering",
	"webhook_endpoints_rate_check":           "rate",
	"webhook_endpoints_rate_burst_check":     "burst",
	"webhook_endpoints_max_in_flight_check":  "max-in-flight",
	"webhook_endpoints_payload_filter_valid": "filter",
}

// dbError turns a refusal of the database into the package's errors: a
// duplicate name into ErrExists, a failed check into a FieldError with the
// trigger's text (which names the rule, never the secret), anything else
// wrapped under op. The DETAIL of a PostgreSQL error, which may hold the
// whole row, never reaches the text: PgError.Error() leaves it out.
func dbError(op, name string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505" && pe.TableName == "webhook_endpoints":
			return &nameError{name: name, err: ErrExists}
		case pe.Code == "23514" && constraintFields[pe.ConstraintName] != "":
			problem := "refused by the database (" + pe.ConstraintName + ")"
			if _, after, ok := strings.Cut(pe.Message, ": "); ok {
				problem = after
			}
			return &FieldError{Field: constraintFields[pe.ConstraintName], Problem: problem}
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}
