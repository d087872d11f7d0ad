package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const attemptsUsage = `usage:
  worker attempts DELIVERY_ID [--json]

Prints every HTTP attempt of one delivery (its x-fluxora-delivery-id, the
webhook-id), oldest first, across its retries and any dlq replay (which
starts again at attempt 1): when it started, how long it took, the endpoint,
the HTTP status (- when no response arrived), the class (retryable or
permanent; - when delivered) and the error. Then where the delivery is now:
pending (the next attempt and when it is due), delivered, or dead-lettered.
History older than WEBHOOK_RETENTION is pruned. --json prints one JSON
object: {"delivery_id", "attempts": [...] ([] when none), "state": {...}}.
Exit codes: 0 ok, 1 failure (database, nothing known of the id), 2 usage,
3 not migrated.
`

// uuidRE is a delivery id as PostgreSQL prints a uuid.
var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// attempt is one row of webhook_attempts as the command prints it.
type attempt struct {
	Attempt    int       `json:"attempt"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS float64   `json:"duration_ms"`
	Endpoint   string    `json:"endpoint"`
	Status     *int      `json:"status"`
	ErrorClass *string   `json:"error_class"`
	Error      *string   `json:"error"`
}

// attemptsJSON is what attempts --json prints.
type attemptsJSON struct {
	DeliveryID string        `json:"delivery_id"`
	Attempts   []attempt     `json:"attempts"`
	State      deliveryState `json:"state"`
}

// deliveryState is where a delivery is now.
type deliveryState struct {
	// State is pending, in_flight, delivered, dead_letter, fanned_out (an
	// event's own row, whose deliveries have ids of their own) or unknown.
	State       string     `json:"state"`
	NextAttempt int        `json:"next_attempt,omitempty"`
	DueAt       *time.Time `json:"due_at,omitempty"`
	Reason      string     `json:"reason,omitempty"` // the dead letter's last error
	FanOut      int        `json:"fanout,omitempty"` // fanned_out: how many deliveries
}

// attemptsSQL reads one delivery's history; the endpoint is named as in
// `worker dlq list`.
const attemptsSQL = `SELECT d.attempt, webhook_time_clamp(d.started_at), d.duration_ms, ` + endpointNameSQL + `, d.status, d.error_class, d.error
FROM webhook_attempts d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.delivery_id = $1::uuid ORDER BY d.started_at, d.id`

// stateSQL finds the delivery's row: a pending one first, then a dead
// letter, then a processed one.
const stateSQL = `SELECT state, attempt, due, reason, fanout FROM (
  SELECT CASE WHEN locked_until > now() THEN 'in_flight' ELSE 'pending' END AS state, attempt, webhook_time_clamp(created_at) AS due,
    NULL::text AS reason, 0 AS fanout, 1 AS rank
  FROM webhook_outbox WHERE delivery_id = $1::uuid AND NOT processed
  UNION ALL
  SELECT 'dead_letter', attempts, NULL, last_error, 0, 2 FROM webhook_dead_letter WHERE delivery_id = $1::uuid
  UNION ALL
  SELECT 'processed', attempt, NULL, NULL, coalesce(fanout, 0), 3 FROM webhook_outbox WHERE delivery_id = $1::uuid AND processed
) s ORDER BY rank LIMIT 1`

func runAttempts(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := commandFlags("worker attempts", attemptsUsage, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "worker attempts: give exactly one DELIVERY_ID (got %d arguments)\n\n%s", len(pos), attemptsUsage)
		return exitUsage
	}
	id := strings.ToLower(strings.TrimSpace(pos[0]))
	if !uuidRE.MatchString(id) {
		fmt.Fprintf(stderr, "worker attempts: %q is not a delivery id (a uuid such as 0b9c3f9e-5d1a-4c1e-9a53-2f7d6f0e8b11)\n", pos[0])
		return exitUsage
	}
	pool, code := opsPool(ctx, getenv, stderr, "attempts")
	if pool == nil {
		return code
	}
	defer pool.Close()
	list, st, err := readAttempts(ctx, pool, id)
	if err != nil {
		fmt.Fprintf(stderr, "worker attempts: %v\n", err)
		return exitFailure
	}
	if len(list) == 0 && st.State == "unknown" {
		fmt.Fprintf(stderr, "worker attempts: nothing is known of delivery %s (never enqueued, or pruned by retention)\n", id)
		return exitFailure
	}
	if *asJSON {
		if list == nil {
			list = []attempt{}
		}
		if err := json.NewEncoder(stdout).Encode(attemptsJSON{id, list, st}); err != nil {
			fmt.Fprintf(stderr, "worker attempts: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	printAttempts(stdout, id, list, st)
	return exitOK
}

func readAttempts(ctx context.Context, pool *pgxpool.Pool, id string) ([]attempt, deliveryState, error) {
	rows, err := pool.Query(ctx, attemptsSQL, id)
	if err != nil {
		return nil, deliveryState{}, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	if err != nil {
		return nil, deliveryState{}, err
	}
	st := deliveryState{State: "unknown"}
	var n, fanout int
	var due *time.Time
	var reason *string
	err = pool.QueryRow(ctx, stateSQL, id).Scan(&st.State, &n, &due, &reason, &fanout)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return list, st, nil
	case err != nil:
		return nil, deliveryState{}, err
	}
	switch st.State {
	case "pending", "in_flight":
		st.NextAttempt, st.DueAt = n, due
	case "dead_letter":
		if reason != nil {
			st.Reason = *reason
		}
	case "processed":
		// Delivered when its last attempt was; else the row is an event
		// that was fanned out (its deliveries have ids of their own).
		st.State = "unknown"
		if len(list) > 0 && list[len(list)-1].ErrorClass == nil {
			st.State = "delivered"
		} else if len(list) == 0 && fanout > 0 {
			st.State, st.FanOut = "fanned_out", fanout
		}
	}
	return list, st, nil
}

func printAttempts(out io.Writer, id string, list []attempt, st deliveryState) {
	noun := "attempts"
	if len(list) == 1 {
		noun = "attempt"
	}
	fmt.Fprintf(out, "delivery %s: %d %s recorded\n", id, len(list), noun)
	if len(list) > 0 {
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "ATTEMPT\tSTARTED\tDURATION\tENDPOINT\tSTATUS\tCLASS\tERROR")
		for _, a := range list {
			status, class, text := "-", "-", "-"
			if a.Status != nil {
				status = fmt.Sprint(*a.Status)
			}
			if a.ErrorClass != nil {
				class = *a.ErrorClass
			}
			if a.Error != nil {
				text = *a.Error
			}
			fmt.Fprintf(w, "%d\t%s\t%.1f ms\t%s\t%s\t%s\t%s\n", a.Attempt, a.StartedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
				a.DurationMS, a.Endpoint, status, class, text)
		}
		_ = w.Flush()
	}
	switch st.State {
	case "pending":
		fmt.Fprintf(out, "now: pending, attempt %d due %s\n", st.NextAttempt, st.DueAt.UTC().Format(time.RFC3339))
	case "in_flight":
		fmt.Fprintf(out, "now: attempt %d in flight\n", st.NextAttempt)
	case "delivered":
		fmt.Fprintln(out, "now: delivered")
	case "dead_letter":
		fmt.Fprintf(out, "now: dead-lettered (%s); worker dlq replay %s sends it again\n", st.Reason, id)
	case "fanned_out":
		fmt.Fprintf(out, "now: an event fanned out to %d endpoint deliveries, each with a delivery id of its own (worker dlq list, the consumer's x-fluxora-delivery-id)\n", st.FanOut)
	default:
		fmt.Fprintln(out, "now: no row left (pruned by retention)")
	}
}
