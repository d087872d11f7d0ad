package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

const dlqUsage = `usage:
  worker dlq list [--limit N] [--event TYPE] [--json]
  worker dlq replay (DELIVERY_ID... | --all) [--event TYPE] [--since T]
  worker dlq purge --before T [--yes]

replay re-enqueues each dead letter as a fresh attempt 1 with the same
delivery id and removes it from webhook_dead_letter in the same transaction.
An unknown id replays nothing and exits 1. purge without --yes only counts
and exits 2. T is RFC 3339, a date (2026-12-01) or an age (24h, 7d).
Exit codes: 0 ok, 1 failure (database, unknown id), 2 usage, 3 not migrated.
`

func runDLQ(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, dlqUsage)
		return exitUsage
	}
	switch args[0] {
	case "list":
		return dlqList(ctx, args[1:], getenv, stdout, stderr)
	case "replay":
		return dlqReplay(ctx, args[1:], getenv, stdout, stderr)
	case "purge":
		return dlqPurge(ctx, args[1:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, dlqUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "worker dlq: unknown command %q\n\n%s", args[0], dlqUsage)
	return exitUsage
}

func dlqFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("worker dlq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, dlqUsage) }
	return fs
}

type deadLetter struct {
	DeliveryID string    `json:"delivery_id"`
	Event      string    `json:"event_type"`
	Attempts   int       `json:"attempts"`
	LastStatus *int      `json:"last_status"`
	LastError  string    `json:"last_error"`
	DiedAt     time.Time `json:"died_at"`
}

func dlqList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := dlqFlags("list", stderr)
	limit := fs.Int("limit", 50, "most entries, newest first")
	event := fs.String("event", "", "only this event type")
	asJSON := fs.Bool("json", false, "print JSON lines")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *limit < 1 {
		fmt.Fprintln(stderr, "worker dlq list: --limit must be at least 1")
		return exitUsage
	}
	pool, code := opsPool(ctx, getenv, stderr, "dlq list")
	if pool == nil {
		return code
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT delivery_id::text, event_type, attempts, last_status, last_error, died_at
		FROM webhook_dead_letter WHERE ($1 = '' OR event_type = $1) ORDER BY died_at DESC, id DESC LIMIT $2`, *event, *limit)
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
		enc := json.NewEncoder(stdout)
		for _, d := range list {
			_ = enc.Encode(d)
		}
		return exitOK
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "DELIVERY ID\tEVENT\tATTEMPTS\tSTATUS\tDIED AT\tLAST ERROR")
	for _, d := range list {
		status := "-"
		if d.LastStatus != nil {
			status = fmt.Sprint(*d.LastStatus)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", d.DeliveryID, d.Event, d.Attempts, status, d.DiedAt.UTC().Format(time.RFC3339), d.LastError)
	}
	_ = w.Flush()
	return exitOK
}

// replaySQL moves dead letters back to the outbox in one statement: a
// replay can never lose or duplicate an entry.
const replaySQL = `WITH moved AS (
  DELETE FROM webhook_dead_letter
  WHERE ($1::uuid[] IS NULL OR delivery_id = ANY($1))
    AND ($2 = '' OR event_type = $2)
    AND ($3::timestamptz IS NULL OR died_at >= $3)
  RETURNING delivery_id, event_type, payload)
INSERT INTO webhook_outbox (delivery_id, event_type, payload) SELECT delivery_id, event_type, payload FROM moved`

func dlqReplay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := dlqFlags("replay", stderr)
	all := fs.Bool("all", false, "replay every dead letter (with --event/--since: every matching one)")
	event := fs.String("event", "", "only this event type")
	since := fs.String("since", "", "only those that died at or after T")
	ids, err := parseInterleaved(fs, args)
	if err == flag.ErrHelp {
		return exitOK
	} else if err != nil {
		return exitUsage
	}
	if *all == (len(ids) > 0) {
		fmt.Fprintln(stderr, "worker dlq replay: give delivery ids or --all (not both)")
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
	if *since != "" {
		t, err := parseTimeArg("since", *since, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "worker dlq replay: %v\n", err)
			return exitUsage
		}
		sinceT = &t
	}
	pool, code := opsPool(ctx, getenv, stderr, "dlq replay")
	if pool == nil {
		return code
	}
	defer pool.Close()
	var n int64
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if len(uuids) > 0 {
			var missing []string
			err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(i::text), '{}') FROM unnest($1::uuid[]) i
				WHERE NOT EXISTS (SELECT 1 FROM webhook_dead_letter d WHERE d.delivery_id = i)`, uuids).Scan(&missing)
			if err != nil {
				return err
			}
			if len(missing) > 0 {
				return fmt.Errorf("not in the dead letter table: %v (nothing replayed)", missing)
			}
		}
		var idArg any
		if len(uuids) > 0 {
			idArg = uuids
		}
		tag, err := tx.Exec(ctx, replaySQL, idArg, *event, sinceT)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq replay: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "replayed %d dead letters\n", n)
	return exitOK
}

func dlqPurge(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := dlqFlags("purge", stderr)
	before := fs.String("before", "", "delete dead letters that died before T (required)")
	yes := fs.Bool("yes", false, "really delete (without it, only count)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *before == "" {
		fmt.Fprintln(stderr, "worker dlq purge: --before is required")
		return exitUsage
	}
	t, err := parseTimeArg("before", *before, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq purge: %v\n", err)
		return exitUsage
	}
	pool, code := opsPool(ctx, getenv, stderr, "dlq purge")
	if pool == nil {
		return code
	}
	defer pool.Close()
	if !*yes {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM webhook_dead_letter WHERE died_at < $1", t).Scan(&n); err != nil {
			fmt.Fprintf(stderr, "worker dlq purge: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "would delete %d dead letters that died before %s; add --yes to delete them\n", n, t.UTC().Format(time.RFC3339))
		return exitUsage
	}
	tag, err := pool.Exec(ctx, "DELETE FROM webhook_dead_letter WHERE died_at < $1", t)
	if err != nil {
		fmt.Fprintf(stderr, "worker dlq purge: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "deleted %d dead letters\n", tag.RowsAffected())
	return exitOK
}
