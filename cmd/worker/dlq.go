package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/endpoints"
)

// dlqCommands are the commands of worker dlq, in the order of the help;
// dlqRunners dispatches them.
var dlqCommands = []command{
	{"list", "[--limit N] [--event TYPE] [--endpoint NAME] [--json]", "dead letters, newest first"},
	{"replay", "(DELIVERY_ID... | --all | --endpoint NAME) [--event TYPE] [--since T]", "send dead letters again, each to its own endpoint"},
	{"purge", "--before T [--endpoint NAME] [--yes]", "delete the dead letters that died before T"},
}

func dlqRunners() map[string]runFunc {
	return map[string]runFunc{"list": dlqList, "replay": dlqReplay, "purge": dlqPurge}
}

var dlqUsage = synopsis("worker dlq", dlqCommands) + `
replay re-enqueues each dead letter as a fresh attempt 1 with the same
delivery id, for the same endpoint only, and removes it from
webhook_dead_letter in the same transaction. An unknown id replays nothing
and exits 1; so does an id whose endpoint is disabled or removed. With
--all or --endpoint, the dead letters of disabled or removed endpoints are
skipped (stderr says how many and why) and the others replayed.
--endpoint NAME keeps the dead letters of that endpoint ("default": the
WEBHOOK_URL endpoint). purge without --yes only counts and exits 2. T is
RFC 3339, a date (2026-12-01) or an age (24h, 7d; at most 36500d). --limit
is 1 to 1000000 (default 50). --json prints a JSON array ([] when empty).
Exit codes: 0 ok, 1 failure (database, unknown id or endpoint, endpoint
disabled), 2 usage or a bad value, 3 not migrated.
`

// dlqLimitMax is the most dead letters dlq list prints.
const dlqLimitMax = 1_000_000

func runDLQ(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return runGroup(ctx, "dlq", dlqRunners(), dlqUsage, args, getenv, stdout, stderr)
}

// runGroup dispatches args[0] among the commands of group (dlq,
// endpoints), whose help is usage.
func runGroup(ctx context.Context, group string, cmds map[string]runFunc, usage string, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	if cmd, ok := cmds[args[0]]; ok {
		return cmd(ctx, args[1:], getenv, stdout, stderr)
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "worker %s: unknown command %q\n\n%s", group, args[0], usage)
	return exitUsage
}

func dlqFlags(name string, stderr io.Writer) *flag.FlagSet {
	return commandFlags("worker dlq "+name, dlqUsage, stderr)
}

// commandFlags is the flag set of an operator command: errors and usage go
// to stderr, --help prints usage.
func commandFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return fs
}

type deadLetter struct {
	DeliveryID string    `json:"delivery_id"`
	Endpoint   string    `json:"endpoint"`
	Event      string    `json:"event_type"`
	Attempts   int       `json:"attempts"`
	LastStatus *int      `json:"last_status"`
	LastError  string    `json:"last_error"`
	DiedAt     time.Time `json:"died_at"`
}

func dlqList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := dlqFlags("list", stderr)
	limit := rangeFlag(fs, "limit", 50, 1, dlqLimitMax, "most entries, newest first")
	event := fs.String("event", "", "only this event type")
	endpoint := fs.String("endpoint", "", `only this endpoint's ("default": the WEBHOOK_URL one)`)
	asJSON := fs.Bool("json", false, "print a JSON array")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	pool, code := opsPool(ctx, getenv, stderr, "dlq list")
	if pool == nil {
		return code
	}
	defer pool.Close()
	ep, err := resolveEndpoint(ctx, pool, *endpoint)
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq list: %v\n", err)
		return exitFailure
	}
	rows, err := pool.Query(ctx, `SELECT d.delivery_id::text, `+endpointNameSQL+`, d.event_type, d.attempts, d.last_status, d.last_error, webhook_time_clamp(d.died_at)
		FROM webhook_dead_letter d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE ($1 = '' OR d.event_type = $1) AND `+endpointFilterSQL("$3", "$4")+`
		ORDER BY d.died_at DESC, d.id DESC LIMIT $2`, *event, *limit, ep.given, ep.id)
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq list: %v\n", err)
		return exitFailure
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[deadLetter])
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq list: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		return printJSON(stdout, stderr, "dlq list", list)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "DELIVERY ID\tENDPOINT\tEVENT\tATTEMPTS\tSTATUS\tDIED AT\tLAST ERROR")
	for _, d := range list {
		status := "-"
		if d.LastStatus != nil {
			status = fmt.Sprint(*d.LastStatus)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.DeliveryID, d.Endpoint, d.Event, d.Attempts, status, d.DiedAt.UTC().Format(time.RFC3339), d.LastError)
	}
	_ = w.Flush()
	return exitOK
}

// endpointNameSQL is the endpoint of dead letter d, with e its LEFT JOIN on
// webhook_endpoints: "default" for the WEBHOOK_URL endpoint, "(removed)"
// when the endpoint no longer exists.
const endpointNameSQL = `CASE WHEN d.endpoint_id IS NULL THEN '` + endpoints.DefaultName + `' ELSE coalesce(e.name, '(removed)') END`

// endpointFilterSQL keeps the dead letters d of the endpoint given by the
// parameters given (boolean: --endpoint was given) and id (uuid, NULL for
// the WEBHOOK_URL endpoint).
func endpointFilterSQL(given, id string) string {
	return "(NOT " + given + "::boolean OR d.endpoint_id IS NOT DISTINCT FROM " + id + "::uuid)"
}

// endpointArg is --endpoint resolved: given false when it was not.
type endpointArg struct {
	given bool
	id    *string // nil: the WEBHOOK_URL endpoint
}

// resolveEndpoint looks the --endpoint name up; "default" is the WEBHOOK_URL
// endpoint (endpoint_id NULL). An unknown name is an error naming it.
func resolveEndpoint(ctx context.Context, pool *pgxpool.Pool, name string) (endpointArg, error) {
	if name == "" {
		return endpointArg{}, nil
	}
	if name == endpoints.DefaultName {
		return endpointArg{given: true}, nil
	}
	var id string
	err := pool.QueryRow(ctx, "SELECT id::text FROM webhook_endpoints WHERE name = $1", name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return endpointArg{}, fmt.Errorf("--endpoint: no endpoint named %q", name)
	} else if err != nil {
		return endpointArg{}, err
	}
	return endpointArg{given: true, id: &id}, nil
}

// replayFilterSQL selects the dead letters a replay is about: ids ($1, NULL
// for all), event type ($2), died since ($3), endpoint ($4, $5).
var replayFilterSQL = `($1::uuid[] IS NULL OR d.delivery_id = ANY($1))
    AND ($2 = '' OR d.event_type = $2)
    AND ($3::timestamptz IS NULL OR d.died_at >= $3)
    AND ` + endpointFilterSQL("$4", "$5")

// replaySQL moves dead letters back to the outbox in one statement: a
// replay can never lose or duplicate an entry. Each goes back to its own
// endpoint: a targeted row for an endpoint of the table; for the WEBHOOK_URL
// endpoint, an event row with fanout 1 ("already fanned out"), which only
// that endpoint receives (fanout NULL would fan the event out to every
// endpoint again), unless it died before its fan-out (fan_out, migration
// 009): it is then fanned out again, as a new event. Dead letters of a
// disabled or removed endpoint stay.
var replaySQL = `WITH moved AS (
  DELETE FROM webhook_dead_letter d
  WHERE ` + replayFilterSQL + `
    AND (d.endpoint_id IS NULL OR EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.enabled))
  RETURNING d.delivery_id, d.event_type, d.payload, d.endpoint_id, d.headers, d.fan_out)
INSERT INTO webhook_outbox (delivery_id, event_type, payload, endpoint_id, fanout, headers)
SELECT delivery_id, event_type, payload, endpoint_id, CASE WHEN endpoint_id IS NULL AND NOT fan_out THEN 1 END, headers FROM moved`

// blockedSQL counts the dead letters of the same selection that replaySQL
// leaves, by endpoint; the name is empty when the endpoint was removed.
var blockedSQL = `SELECT d.endpoint_id::text, coalesce(e.name, ''), count(*)
FROM webhook_dead_letter d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE ` + replayFilterSQL + `
  AND d.endpoint_id IS NOT NULL AND (e.id IS NULL OR NOT e.enabled)
GROUP BY 1, 2 ORDER BY 2, 1`

// blocked is the dead letters of one endpoint a replay cannot send.
type blocked struct {
	id    string
	name  string // "": removed
	count int64
}

func (b blocked) String() string {
	if b.name == "" {
		return fmt.Sprintf("%d dead letters of a removed endpoint (id %s): it no longer exists, they cannot be replayed", b.count, b.id)
	}
	return fmt.Sprintf("%d dead letters of endpoint %s: endpoint %s is disabled: run `worker endpoints enable %s` first", b.count, b.name, b.name, b.name)
}

func dlqReplay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := dlqFlags("replay", stderr)
	all := fs.Bool("all", false, "replay every dead letter (with --event/--since/--endpoint: every matching one)")
	event := fs.String("event", "", "only this event type")
	since := timeArgFlag(fs, "since", "only those that died at or after T")
	endpoint := fs.String("endpoint", "", `only this endpoint's ("default": the WEBHOOK_URL one)`)
	ids, err := parseInterleaved(fs, args)
	if err == flag.ErrHelp {
		return exitOK
	} else if err != nil {
		return exitUsage
	}
	if (*all || *endpoint != "") == (len(ids) > 0) {
		fmt.Fprintln(stderr, "worker dlq replay: give delivery ids, or --all or --endpoint NAME (not both)")
		return exitUsage
	}
	var uuids []string
	for _, id := range ids {
		var u pgtype.UUID
		if err := u.Scan(id); err != nil {
			fmt.Fprintf(stderr, "worker dlq replay: %q is not a delivery id (uuid)\n", id)
			return exitUsage
		}
		uuids = append(uuids, id)
	}
	var sinceT *time.Time
	if since.set {
		sinceT = &since.t
	}
	pool, code := opsPool(ctx, getenv, stderr, "dlq replay")
	if pool == nil {
		return code
	}
	defer pool.Close()
	ep, err := resolveEndpoint(ctx, pool, *endpoint)
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq replay: %v\n", err)
		return exitFailure
	}
	var idArg any
	if len(uuids) > 0 {
		idArg = uuids
	}
	params := []any{idArg, *event, sinceT, ep.given, ep.id}
	var n int64
	var skipped []blocked
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := replayable(ctx, tx, uuids); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, blockedSQL, params...)
		if err != nil {
			return err
		}
		var b blocked
		if _, err := pgx.ForEachRow(rows, []any{&b.id, &b.name, &b.count}, func() error { skipped = append(skipped, b); return nil }); err != nil {
			return err
		}
		if len(uuids) > 0 && len(skipped) > 0 {
			why := make([]string, len(skipped))
			for i, b := range skipped {
				why[i] = b.String()
			}
			return errors.New(strings.Join(why, "; ") + " (nothing replayed)")
		}
		tag, err := tx.Exec(ctx, replaySQL, params...)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq replay: %v\n", err)
		return exitFailure
	}
	for _, b := range skipped {
		fmt.Fprintf(stderr, "worker dlq replay: skipped %v\n", b)
	}
	fmt.Fprintf(stdout, "replayed %d dead letters\n", n)
	return exitOK
}

// replayable checks that every delivery id given is in the dead letter
// table.
func replayable(ctx context.Context, tx pgx.Tx, uuids []string) error {
	if len(uuids) == 0 {
		return nil
	}
	var missing []string
	err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(i::text), '{}') FROM unnest($1::uuid[]) i
		WHERE NOT EXISTS (SELECT 1 FROM webhook_dead_letter d WHERE d.delivery_id = i)`, uuids).Scan(&missing)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("not in the dead letter table: %v (nothing replayed)", missing)
	}
	return nil
}

func dlqPurge(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := dlqFlags("purge", stderr)
	before := timeArgFlag(fs, "before", "delete dead letters that died before T (required)")
	endpoint := fs.String("endpoint", "", `only this endpoint's ("default": the WEBHOOK_URL one)`)
	yes := fs.Bool("yes", false, "really delete (without it, only count)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !before.set {
		fmt.Fprintln(stderr, "worker dlq purge: --before is required")
		return exitUsage
	}
	t := before.t
	pool, code := opsPool(ctx, getenv, stderr, "dlq purge")
	if pool == nil {
		return code
	}
	defer pool.Close()
	ep, err := resolveEndpoint(ctx, pool, *endpoint)
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq purge: %v\n", err)
		return exitFailure
	}
	where := "FROM webhook_dead_letter d WHERE d.died_at < $1 AND " + endpointFilterSQL("$2", "$3")
	if !*yes {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) "+where, t, ep.given, ep.id).Scan(&n); err != nil {
			fmt.Fprintf(stderr, "worker dlq purge: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "would delete %d dead letters that died before %s; add --yes to delete them\n", n, t.UTC().Format(time.RFC3339))
		return exitUsage
	}
	tag, err := pool.Exec(ctx, "DELETE "+where, t, ep.given, ep.id)
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq purge: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "deleted %d dead letters\n", tag.RowsAffected())
	return exitOK
}
