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

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fluxora/webhook-worker/outbox"
)

// dlqCommands are the commands of worker dlq, in the order of the help;
// dlqRunners dispatches them.
var dlqCommands = []command{
	{"list", "[--limit N] [--event TYPE] [--endpoint NAME] [--json]", "dead letters, newest first"},
	{"replay", "(DELIVERY_ID... | --all | --endpoint NAME) [--event-type TYPE] [--since T] [--until T]", "send dead letters again, each to its own endpoint"},
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
--since and --until keep those that died at or after --since and before
--until; --event-type (or --event) keeps one event type.
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

func dlqList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := dlqFlags("list", stderr)
	limit := rangeFlag(fs, "limit", 50, 1, dlqLimitMax, "most entries, newest first")
	event := fs.String("event", "", "only this event type")
	endpoint := fs.String("endpoint", "", `only this endpoint's ("default": the WEBHOOK_URL one)`)
	asJSON := fs.Bool("json", false, "print a JSON array")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	store, closeStore, code := opsStore(ctx, getenv, stderr, "dlq list")
	if store == nil {
		return code
	}
	defer closeStore()
	list, err := store.DeadLetters(ctx, outbox.DeadLetterQuery{Limit: *limit, EventType: *event, Endpoint: *endpoint})
	if err != nil {
		return dlqFailed(stderr, "dlq list", err)
	}
	if *asJSON {
		return printJSON(stdout, stderr, "dlq list", list)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "DELIVERY ID\tENDPOINT\tEVENT\tATTEMPTS\tSTATUS\tDIED AT\tKEY\tLAST ERROR")
	for _, d := range list {
		status := "-"
		if d.LastStatus != nil {
			status = fmt.Sprint(*d.LastStatus)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", d.DeliveryID, cell(d.Endpoint), cell(d.Event), d.Attempts, status,
			d.DiedAt.UTC().Format(time.RFC3339), cell(laneText(d)), cell(d.LastError))
	}
	_ = w.Flush()
	return exitOK
}

// dlqFailed prints the error of a dlq command and returns its exit code;
// an unknown --endpoint is named as the flag.
func dlqFailed(stderr io.Writer, cmd string, err error) int {
	if errors.Is(err, outbox.ErrEndpointNotFound) {
		fmt.Fprintf(stderr, "worker %s: --endpoint: %v\n", cmd, err)
	} else {
		fmt.Fprintf(stderr, "worker %s: %v\n", cmd, err)
	}
	return exitFailure
}

// blockedText says why a replay cannot send the dead letters of b.
func blockedText(b outbox.Blocked) string {
	if b.Name == "" {
		return fmt.Sprintf("%d dead letters of a removed endpoint (id %s): it no longer exists, they cannot be replayed", b.Count, b.EndpointID)
	}
	return fmt.Sprintf("%d dead letters of endpoint %s: endpoint %s is disabled: run `worker endpoints enable %s` first", b.Count, b.Name, b.Name, b.Name)
}

func dlqReplay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := dlqFlags("replay", stderr)
	all := fs.Bool("all", false, "replay every dead letter (with --event/--since/--endpoint: every matching one)")
	event := fs.String("event", "", "only this event type")
	fs.StringVar(event, "event-type", "", "only this event type (the same as --event)")
	since := timeArgFlag(fs, "since", "only those that died at or after T")
	until := timeArgFlag(fs, "until", "only those that died before T")
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
	store, closeStore, code := opsStore(ctx, getenv, stderr, "dlq replay")
	if store == nil {
		return code
	}
	defer closeStore()
	r, err := store.Replay(ctx, outbox.ReplayFilter{IDs: uuids, EventType: *event, Since: since.ptr(), Until: until.ptr(), Endpoint: *endpoint})
	if err != nil {
		return dlqFailed(stderr, "dlq replay", err)
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(stderr, "worker dlq replay: not in the dead letter table: %v (nothing replayed)\n", r.Missing)
		return exitFailure
	}
	if len(uuids) > 0 && len(r.Blocked) > 0 {
		why := make([]string, len(r.Blocked))
		for i, b := range r.Blocked {
			why[i] = blockedText(b)
		}
		fmt.Fprintf(stderr, "worker dlq replay: %s (nothing replayed)\n", strings.Join(why, "; "))
		return exitFailure
	}
	for _, b := range r.Blocked {
		fmt.Fprintf(stderr, "worker dlq replay: skipped %s\n", blockedText(b))
	}
	fmt.Fprintf(stdout, "replayed %d dead letters\n", r.Count)
	return exitOK
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
	store, closeStore, code := opsStore(ctx, getenv, stderr, "dlq purge")
	if store == nil {
		return code
	}
	defer closeStore()
	if !*yes {
		n, err := store.CountDeadLettersBefore(ctx, t, *endpoint)
		if err != nil {
			return dlqFailed(stderr, "dlq purge", err)
		}
		fmt.Fprintf(stdout, "would delete %d dead letters that died before %s; add --yes to delete them\n", n, t.UTC().Format(time.RFC3339))
		return exitUsage
	}
	n, err := store.PurgeDeadLetters(ctx, t, *endpoint)
	if err != nil {
		return dlqFailed(stderr, "dlq purge", err)
	}
	fmt.Fprintf(stdout, "deleted %d dead letters\n", n)
	return exitOK
}

// opsStore is the store of an operator command (opsConnectStore without
// the configuration).
func opsStore(ctx context.Context, getenv func(string) string, stderr io.Writer, name string) (store *outbox.Store, closeStore func(), code int) {
	_, store, closeStore, code = opsConnectStore(ctx, getenv, stderr, name)
	return store, closeStore, code
}

// laneText is a dead letter's KEY column: "-" without an ordering key, else
// the key and sequence, and whether the key moved on without it (broke
// its order) or waits for it (holds the key).
func laneText(d outbox.DeadLetter) string {
	switch {
	case d.OrderingKey == "":
		return "-"
	case d.OrderBroken:
		return fmt.Sprintf("%s #%d (order broken)", d.OrderingKey, d.Sequence)
	}
	return fmt.Sprintf("%s #%d (holds the key)", d.OrderingKey, d.Sequence)
}
