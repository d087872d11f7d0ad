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

	"github.com/fluxora/webhook-worker/outbox"
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

// attemptsJSON is what attempts --json prints.
type attemptsJSON struct {
	DeliveryID string               `json:"delivery_id"`
	Attempts   []outbox.Attempt     `json:"attempts"`
	State      outbox.DeliveryState `json:"state"`
}

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
	store, closeStore, code := opsStore(ctx, getenv, stderr, "attempts")
	if store == nil {
		return code
	}
	defer closeStore()
	list, st, err := store.Attempts(ctx, id)
	if err != nil {
		fmt.Fprintf(stderr, "worker attempts: %v\n", err)
		return exitFailure
	}
	if len(list) == 0 && st.State == outbox.StateUnknown {
		fmt.Fprintf(stderr, "worker attempts: nothing is known of delivery %s (never enqueued, or pruned by retention)\n", id)
		return exitFailure
	}
	if *asJSON {
		if list == nil {
			list = []outbox.Attempt{}
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

func printAttempts(out io.Writer, id string, list []outbox.Attempt, st outbox.DeliveryState) {
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
				a.DurationMS, cell(a.Endpoint), status, cell(class), cell(text))
		}
		_ = w.Flush()
	}
	switch st.State {
	case outbox.StatePending:
		fmt.Fprintf(out, "now: pending, attempt %d due %s\n", st.NextAttempt, st.DueAt.UTC().Format(time.RFC3339))
	case outbox.StateInFlight:
		fmt.Fprintf(out, "now: attempt %d in flight\n", st.NextAttempt)
	case outbox.StateDelivered:
		fmt.Fprintln(out, "now: delivered")
	case outbox.StateDeadLetter:
		fmt.Fprintf(out, "now: dead-lettered (%s); worker dlq replay %s sends it again\n", cell(st.Reason), id)
	case outbox.StateFannedOut:
		fmt.Fprintf(out, "now: an event fanned out to %d endpoint deliveries, each with a delivery id of its own (worker dlq list, the consumer's x-fluxora-delivery-id)\n", st.FanOut)
	default:
		fmt.Fprintln(out, "now: no row left (pruned by retention)")
	}
}
