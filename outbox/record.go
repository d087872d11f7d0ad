package outbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/fluxora/webhook-worker/webhook"
)

// maxDelay is the longest delay Record writes (Retry, Defer): any longer
// one is cut to it, so that no value can overflow the statement's interval
// and fail the whole batch.
const maxDelay = 366 * 24 * time.Hour

// The statements of Record (queries/record.sql, record_fan.sql and
// lanes.sql; ARCHITECTURE.md, "The record"), with their arguments
// numbered: record for a batch whose outcomes all have rows of their own,
// recordFan for one with outcomes of fan-outs in flight (migration 018),
// whose steps for those cost every batch; lockLanes before and promote
// after either, in the same round trip, when outcomes move keyed rows.
var (
	recordStmt    = statement("record")
	recordFanStmt = statement("record_fan")
	lockLanesStmt = statement("lock_lanes")
	promoteStmt   = statement("promote")
)

// recorded is a row of the record's result: the id of a row (or of a
// delivery of a fan-out in flight) whose outcome it wrote.
type recorded struct {
	ID int64
}

func (r *recorded) field(col string) any {
	if col == "id" {
		return &r.ID
	}
	return nil
}

// recordArgs are the record's arrays for outcomes, in their order. Free
// text (errors) is made valid UTF-8 without NUL characters, which no
// PostgreSQL text can hold: a value the server refused would fail the
// whole batch. marks says the outcome ends the row (ends): marked moves
// it to history. An array of its own, not kind IN (…) in the statement,
// so that the planner takes half the outcomes for marked, not a few in a
// hundred, and hashes them: it compared every outcome with every row
// instead, a cost that grows with the square of the batch.
//
// With outcomes of deliveries without rows (fan is true), it gives
// record_fan's arrays too; else own is ids, and record is the statement.
func recordArgs(outcomes []webhook.Outcome) (args pgx.NamedArgs, fan bool) {
	n := len(outcomes)
	var (
		ids                                    = make([]int64, n)
		tokens                                 = make([]pgtype.UUID, n)
		kinds, errs, healths, classes, tryErrs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		attempts, statuses                     = make([]int32, n), make([]int32, n)
		delays                                 = make([]int64, n)
		started                                = make([]pgtype.Timestamptz, n)
		took                                   = make([]float64, n)
		marks                                  = make([]bool, n)
	)
	for i, o := range outcomes {
		ids[i], tokens[i], kinds[i] = o.ID, pgtype.UUID{Bytes: o.Token, Valid: true}, string(o.Kind)
		attempts[i], delays[i], statuses[i] = int32(o.Attempt), min(max(o.Delay, 0), maxDelay).Milliseconds(), int32(o.Status)
		errs[i], healths[i] = text(o.Error), string(o.Health)
		started[i] = pgtype.Timestamptz{Time: o.Started, Valid: !o.Started.IsZero()}
		took[i], classes[i], tryErrs[i] = float64(o.Took.Microseconds())/1000, text(o.AttemptClass), text(o.AttemptError)
		marks[i] = ends(o.Kind)
		fan = fan || o.Event != 0
	}
	args = pgx.NamedArgs{"ids": ids, "tokens": tokens, "kinds": kinds, "attempts": attempts, "delays_ms": delays,
		"statuses": statuses, "errors": errs, "healths": healths, "started": started, "took_ms": took,
		"try_classes": classes, "try_errors": tryErrs, "marks": marks, "own": ids}
	if fan {
		fanArgs(outcomes, args)
	}
	return args, fan
}

// fanArgs adds record_fan's arrays for outcomes to args: each one's
// event and endpoint (0 and "" for an outcome of a row), the events once
// each, and the ids of the outcomes of rows.
func fanArgs(outcomes []webhook.Outcome, args pgx.NamedArgs) {
	eventOf, endpointOf := make([]int64, len(outcomes)), make([]string, len(outcomes))
	events, own := []int64{}, make([]int64, 0, len(outcomes))
	for i, o := range outcomes {
		if o.Event == 0 {
			own = append(own, o.ID)
			continue
		}
		eventOf[i], endpointOf[i] = o.Event, o.EndpointID
		if !slices.Contains(events, o.Event) {
			events = append(events, o.Event)
		}
	}
	args["event_of"], args["endpoint_of"], args["events"], args["own"] = eventOf, endpointOf, events, own
}

// ends says whether an outcome of kind k ends its row: delivered, retried
// (a new row carries the next attempt) or dead-lettered.
func ends(k webhook.Kind) bool { return k == webhook.Done || k == webhook.Retry || k == webhook.Dead }

// text is s as a PostgreSQL text can hold it: valid UTF-8 (an invalid
// byte becomes U+FFFD), without NUL characters.
func text(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// Record writes outcomes in one statement (one implicit transaction, one
// round trip) and returns, in outcomes order, whether each was written. An
// outcome is not written when its row is no longer held under its token:
// the lease expired and another worker claimed the row (a lost lease). On
// error nothing is written; the rows stay pending and, once their leases
// expire, are claimed again.
func (s *Store) Record(ctx context.Context, outcomes []webhook.Outcome) (written []bool, err error) {
	byName, fan := recordArgs(outcomes)
	byName["console_url"] = s.consoleURL
	stmt := recordStmt
	if fan {
		stmt = recordFanStmt
	}
	args, err := stmt.args(byName)
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	endpoints, keys := lanesOf(outcomes)
	var lock, promote []any // the lanes' statements, only with keyed rows
	if len(keys) > 0 {
		lanes := pgx.NamedArgs{"endpoints": endpoints, "keys": keys}
		if lock, err = lockLanesStmt.args(lanes); err == nil {
			promote, err = promoteStmt.args(lanes)
		}
		if err != nil {
			return nil, fmt.Errorf("record outcomes: %w", err)
		}
	}
	pause, err := pauseArgs(outcomes)
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	done, err := retryMoved(ctx, func() (map[int64]bool, error) {
		done := make(map[int64]bool, len(outcomes))
		// One round trip, one transaction: with keyed rows, the lanes'
		// locks before the record and the lanes moved on after it.
		var b pgx.Batch
		b.Queue(byIndexStmt.sql)
		if len(keys) > 0 {
			b.Queue(lockLanesStmt.sql, lock...)
		}
		b.Queue(stmt.sql, args...).Query(func(rows pgx.Rows) error {
			ids, err := appendByName[recorded](nil, rows, 1)
			for _, r := range ids {
				done[r.ID] = true
			}
			return err
		})
		if len(keys) > 0 {
			b.Queue(promoteStmt.sql, promote...)
		}
		if pause != nil {
			b.Queue(pauseStmt.sql, pause...)
		}
		if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
			return nil, fmt.Errorf("record outcomes: %w", err)
		}
		return done, nil
	})
	if err != nil {
		return nil, err
	}
	written = make([]bool, len(outcomes))
	for i, o := range outcomes {
		written[i] = done[o.ID]
	}
	return written, nil
}

// pauseStmt pauses the endpoints whose consumers asked for it
// (queries/flow.sql).
var pauseStmt = statement("pause")

// byIndexStmt opens a record's round trip (queries/plan.sql).
var byIndexStmt = statement("by_index")

// pauseArgs are pause's arguments for the outcomes that pause their
// endpoint (Pause), the longest of each; nil when none does.
func pauseArgs(outcomes []webhook.Outcome) ([]any, error) {
	longest := map[string]time.Duration{}
	for _, o := range outcomes {
		if o.Pause > 0 {
			longest[o.EndpointID] = max(longest[o.EndpointID], o.Pause)
		}
	}
	if len(longest) == 0 {
		return nil, nil
	}
	endpoints, ms := make([]string, 0, len(longest)), make([]int64, 0, len(longest))
	for id, d := range longest {
		endpoints, ms = append(endpoints, id), append(ms, min(d, maxDelay).Milliseconds())
	}
	return pauseStmt.args(pgx.NamedArgs{"endpoints": endpoints, "pause_ms": ms})
}

// lanesOf lists the lanes (endpoint id, "" for the WEBHOOK_URL endpoint;
// key) of the outcomes that move a keyed row out of its lane: delivered,
// retried or dead-lettered.
func lanesOf(outcomes []webhook.Outcome) (endpoints, keys []string) {
	for _, o := range outcomes {
		if o.OrderingKey != "" && ends(o.Kind) {
			endpoints, keys = append(endpoints, o.EndpointID), append(keys, o.OrderingKey)
		}
	}
	return endpoints, keys
}
