package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/dispatcher"
)

// endpointStatus is one endpoint's line of `worker status`.
type endpointStatus struct {
	Name           string     `json:"name"`
	Enabled        bool       `json:"enabled"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	Pending        int64      `json:"pending_due"`
	Scheduled      int64      `json:"scheduled"`
	InFlight       int64      `json:"in_flight"`
	DeadLetters    int64      `json:"dead_letters"`
	FailingSince   *time.Time `json:"failing_since,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	LastStatus     *int       `json:"last_status,omitempty"`
	LastErrorAt    *time.Time `json:"last_error_at,omitempty"`
	Circuit        string     `json:"circuit,omitempty"` // with REDIS_URL: closed, open, half-open, or why unknown
	url            string
}

// endpointsStatusSQL reads every endpoint of the table, and the WEBHOOK_URL
// one ("default") when it has rows: pending rows once through the partial
// index of pending rows, dead letters once. A row with endpoint_id NULL and
// fanout NULL is an event not fanned out yet, nobody's delivery.
const endpointsStatusSQL = `WITH p AS (
  SELECT endpoint_id,
         count(*) FILTER (WHERE created_at <= now() AND (locked_until IS NULL OR locked_until <= now())) AS due,
         count(*) FILTER (WHERE created_at > now()) AS scheduled,
         count(*) FILTER (WHERE locked_until > now()) AS in_flight
  FROM webhook_outbox WHERE NOT processed AND (endpoint_id IS NOT NULL OR fanout IS NOT NULL)
  GROUP BY endpoint_id
), d AS (
  SELECT endpoint_id, count(*) AS dead FROM webhook_dead_letter GROUP BY endpoint_id
), e AS (
  SELECT id, name, url, enabled, coalesce(disabled_reason, '') AS disabled_reason, webhook_time_clamp(failing_since) AS failing_since,
         coalesce(last_error, '') AS last_error, last_status, webhook_time_clamp(last_error_at) AS last_error_at
  FROM webhook_endpoints
  UNION ALL
  SELECT NULL, $1, '', true, '', NULL, '', NULL, NULL
  WHERE $2 OR EXISTS (SELECT 1 FROM p WHERE endpoint_id IS NULL) OR EXISTS (SELECT 1 FROM d WHERE endpoint_id IS NULL)
)
SELECT e.name, e.url, e.enabled, e.disabled_reason, coalesce(p.due, 0), coalesce(p.scheduled, 0), coalesce(p.in_flight, 0),
       coalesce(d.dead, 0), e.failing_since, e.last_error, e.last_status, e.last_error_at
FROM e
  LEFT JOIN p ON p.endpoint_id IS NOT DISTINCT FROM e.id
  LEFT JOIN d ON d.endpoint_id IS NOT DISTINCT FROM e.id
WHERE $3 = '' OR e.name = $3
ORDER BY e.id IS NOT NULL, e.name`

// endpointsStatus reads the endpoints' status; only, when not empty, names
// the one endpoint wanted.
func endpointsStatus(ctx context.Context, pool *pgxpool.Pool, cfg opsConfig, only string) ([]endpointStatus, error) {
	rows, err := pool.Query(ctx, endpointsStatusSQL, dispatcher.DefaultEndpointName, cfg.WebhookURL != "", only)
	if err != nil {
		return nil, err
	}
	out := []endpointStatus{}
	var e endpointStatus
	_, err = pgx.ForEachRow(rows, []any{&e.Name, &e.url, &e.Enabled, &e.DisabledReason, &e.Pending, &e.Scheduled, &e.InFlight,
		&e.DeadLetters, &e.FailingSince, &e.LastError, &e.LastStatus, &e.LastErrorAt}, func() error {
		if e.Name == dispatcher.DefaultEndpointName && e.url == "" {
			e.url = cfg.WebhookURL
		}
		out = append(out, e)
		e = endpointStatus{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	circuits(ctx, cfg, out)
	return out, nil
}

// circuits fills in each endpoint's breaker state when REDIS_URL is set.
func circuits(ctx context.Context, cfg opsConfig, eps []endpointStatus) {
	if cfg.RedisURL == "" || len(eps) == 0 {
		return
	}
	g, closeGates, err := opsGates(cfg)
	if err != nil {
		return
	}
	defer closeGates()
	for i := range eps {
		if eps[i].url == "" {
			continue
		}
		st, err := g.State(ctx, eps[i].url)
		if err != nil {
			eps[i].Circuit = "unknown (redis unreachable)"
			continue
		}
		eps[i].Circuit = st.State
		if st.Failures > 0 {
			eps[i].Circuit += fmt.Sprintf(", %d failures", st.Failures)
		}
	}
}

// printEndpoints writes the endpoints' table.
func printEndpoints(out io.Writer, eps []endpointStatus) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ENDPOINT\tSTATE\tPENDING\tIN FLIGHT\tSCHEDULED\tDEAD LETTERS\tCIRCUIT\tLAST ERROR")
	for _, e := range eps {
		state := "enabled"
		if !e.Enabled {
			state = "disabled: " + e.DisabledReason
		} else if e.FailingSince != nil {
			state = "failing since " + e.FailingSince.UTC().Format(time.RFC3339)
		}
		last := "-"
		if e.LastError != "" {
			last = e.LastError
			if e.LastErrorAt != nil {
				last += " (" + e.LastErrorAt.UTC().Format(time.RFC3339) + ")"
			}
		}
		circuit := e.Circuit
		if circuit == "" {
			circuit = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", e.Name, state, e.Pending, e.InFlight, e.Scheduled, e.DeadLetters, circuit, last)
	}
	_ = w.Flush()
}
