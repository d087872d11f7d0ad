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

// RecordSQL writes every outcome in one statement. The outcomes come as
// parallel arrays, one element an outcome (see recordArgs), which the
// driver sends in binary: a JSON array parsed by jsonb_to_recordset would
// cost the server a parse of every outcome and the worker its encoding.
// @own are the outcomes' row ids (@ids here), so that "o.id = ANY(@own)"
// keeps every plan on the primary key whatever the planner guesses of the
// arrays. released, deferred and marked touch only
// rows still held under the outcome's token (the fence); the retry rows and
// dead letters come from marked, so they exist exactly for the rows
// marked. A deferral moves the row itself (its created_at is the due time
// the claim orders and filters by) and ends its lease: it makes no row and
// records no attempt. A retry's new attempt copies the event and its
// endpoint from the row, so the payload does not travel back to the
// server. health updates an endpoint's failure run only when it changes
// (and its last error at most once a second), so that a steady stream of
// outcomes does not write, nor queue on, the endpoint's row. Outcomes of
// deliveries without rows of their own (fan-outs in flight) go through
// RecordFanSQL instead: its steps for them cost every batch, so a batch
// without them does not run them.
const RecordSQL = `WITH r AS (
  ` + recordArrays + `)
    AS r(` + recordColumns + `)
)` + recordOwnRows + `, ended AS (
  ` + endedOwn + `
)` + recordEnded + `
SELECT id FROM marked UNION ALL SELECT id FROM released UNION ALL SELECT id FROM deferred`

// The parts of RecordSQL and RecordFanSQL: the outcomes' arrays and their
// columns (r); the outcomes of rows (released, deferred, marked); the rows
// they end (ended); and what follows from those (tried, requeued, dead,
// health, endpoints).
const (
	recordArrays = `SELECT * FROM unnest(@ids::bigint[], @tokens::uuid[], @kinds::text[], @attempts::int[], @delays_ms::bigint[], @statuses::int[],
      @errors::text[], @healths::text[], @started::timestamptz[], @took_ms::float8[], @try_classes::text[], @try_errors::text[],
      @marks::boolean[]`
	recordColumns = `id, token, kind, attempt, delay_ms, status, error, health, started, took_ms, try_class, try_error, mark`
	recordOwnRows = `, released AS (
  UPDATE webhook_outbox o SET locked_until = NULL, lease_token = NULL
  FROM r
  WHERE r.kind = 'release' AND o.id = ANY(@own) AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id
), deferred AS (
  UPDATE webhook_outbox o
  SET created_at = clock_timestamp() + r.delay_ms * interval '1 millisecond', locked_until = NULL, lease_token = NULL
  FROM r
  WHERE r.kind = 'defer' AND o.id = ANY(@own) AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id
), marked AS (
  UPDATE webhook_outbox o SET processed = true, processed_at = now()
  FROM r
  WHERE r.mark AND o.id = ANY(@own) AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id, o.delivery_id, o.event_type, o.payload, o.endpoint_id, o.fanout, o.headers, o.ordering_key, o.ordering_seq,
    r.kind, r.attempt, r.delay_ms, r.status, r.error, r.health,
    o.attempt AS made, r.started, r.took_ms, r.try_class, r.try_error
)`
	endedColumns = `id, delivery_id, event_type, payload, endpoint_id, fanout, headers, ordering_key, ordering_seq,
    kind, attempt, delay_ms, status, error, health, made, started, took_ms, try_class, try_error`
	endedOwn    = `SELECT ` + endedColumns + ` FROM marked`
	recordEnded = `, tried AS (
  INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class, error)
  SELECT delivery_id, endpoint_id, made, coalesce(started, clock_timestamp()), took_ms, NULLIF(status, 0), NULLIF(try_class, ''), NULLIF(try_error, '')
  FROM ended WHERE health <> ''
), requeued AS (
  INSERT INTO webhook_outbox (delivery_id, event_type, payload, attempt, created_at, endpoint_id, fanout, headers, ordering_key, ordering_seq)
  SELECT delivery_id, event_type, payload, attempt, clock_timestamp() + delay_ms * interval '1 millisecond', endpoint_id, fanout, headers,
    ordering_key, ordering_seq
  FROM ended WHERE kind = 'retry'
), dead AS (
  INSERT INTO webhook_dead_letter (` + deadLetterColumns + `)
  SELECT m.delivery_id, m.event_type, m.payload, m.headers, m.endpoint_id, m.attempt, NULLIF(m.status, 0), m.error,
    m.ordering_key, m.ordering_seq, m.ordering_key IS NOT NULL AND e.ordering IS DISTINCT FROM 'hold'
  FROM ended m LEFT JOIN webhook_endpoints e ON m.ordering_key IS NOT NULL AND e.id = m.endpoint_id
  WHERE m.kind = 'dead'
), health AS (
  SELECT endpoint_id, bool_or(health = 'healthy') AS ok,
    max(error) FILTER (WHERE health = 'failing') AS error, max(NULLIF(status, 0)) FILTER (WHERE health = 'failing') AS status
  FROM ended WHERE endpoint_id IS NOT NULL AND health <> ''
  GROUP BY endpoint_id
), endpoints AS (
  UPDATE webhook_endpoints e
  SET failing_since = CASE WHEN h.ok THEN NULL ELSE coalesce(e.failing_since, now()) END,
      last_error = CASE WHEN h.ok THEN e.last_error ELSE h.error END,
      last_status = CASE WHEN h.ok THEN e.last_status ELSE h.status END,
      last_error_at = CASE WHEN h.ok THEN e.last_error_at ELSE now() END
  FROM health h
  WHERE e.id = h.endpoint_id
    AND CASE WHEN h.ok THEN e.failing_since IS NOT NULL
        ELSE e.failing_since IS NULL OR e.last_error_at IS NULL OR e.last_error_at < now() - interval '1 second' END
)`
)

// LockLanesSQL runs before RecordSQL, and PromoteSQL after it, in the
// same transaction and round trip, when outcomes move rows of ordering
// lanes (migration 015). It locks the lanes (@endpoints, "" for the
// WEBHOOK_URL endpoint, and @keys, side by side) in order, so that two
// writes never wait on each other, and sets fluxora.lanes for the
// transaction, so that the per-row trigger webhook_ordering_leave stands
// aside: PromoteSQL then moves every lane on in one statement. A row
// entering one of these lanes meanwhile waits for the locks, and then sees
// the lane as the record left it. Writes without keyed rows run RecordSQL
// alone, as before ordering existed.
const LockLanesSQL = `WITH locked AS (
  SELECT 1 FROM webhook_ordering_lanes l
  WHERE (l.endpoint_id, l.ordering_key) IN (
    SELECT coalesce(nullif(x.e, '')::uuid, webhook_ordering_nil()), x.k FROM unnest(@endpoints::text[], @keys::text[]) AS x(e, k))
  ORDER BY l.endpoint_id, l.ordering_key
  FOR NO KEY UPDATE OF l
)
SELECT set_config('fluxora.lanes', 'record', true), (SELECT count(*) FROM locked)`

// PromoteSQL makes the oldest waiting row of each lane of @endpoints and
// @keys (as LockLanesSQL's) its head, unless the lane has one (a retry's
// new row, or a row whose outcome the fence refused) or a dead letter holds
// it ('hold'). It runs after RecordSQL in the same transaction, so it sees
// what the record did.
const PromoteSQL = `WITH lanes AS (
  SELECT DISTINCT nullif(x.e, '')::uuid AS endpoint_id, x.k AS ordering_key FROM unnest(@endpoints::text[], @keys::text[]) AS x(e, k)
)
UPDATE webhook_outbox o SET held = false
FROM (
  SELECT (SELECT w.id FROM webhook_outbox w
          WHERE NOT w.processed AND w.endpoint_id = l.endpoint_id AND w.ordering_key = l.ordering_key AND w.held
          ORDER BY w.ordering_seq LIMIT 1) AS id
  FROM lanes l
  WHERE l.endpoint_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM webhook_outbox h
                    WHERE NOT h.processed AND h.endpoint_id = l.endpoint_id AND h.ordering_key = l.ordering_key AND NOT h.held)
    AND NOT EXISTS (SELECT 1 FROM webhook_dead_letter d
                    WHERE d.endpoint_id = l.endpoint_id AND d.ordering_key = l.ordering_key AND NOT d.order_broken AND NOT d.fan_out)
  UNION ALL
  SELECT (SELECT w.id FROM webhook_outbox w
          WHERE NOT w.processed AND w.endpoint_id IS NULL AND w.fanout IS NOT NULL AND w.ordering_key = l.ordering_key AND w.held
          ORDER BY w.ordering_seq LIMIT 1)
  FROM lanes l
  WHERE l.endpoint_id IS NULL
    AND NOT EXISTS (SELECT 1 FROM webhook_outbox h
                    WHERE NOT h.processed AND h.endpoint_id IS NULL AND h.fanout IS NOT NULL AND h.ordering_key = l.ordering_key
                      AND NOT h.held)
    AND NOT EXISTS (SELECT 1 FROM webhook_dead_letter d
                    WHERE d.endpoint_id IS NULL AND d.ordering_key = l.ordering_key AND NOT d.order_broken AND NOT d.fan_out)
) nx
WHERE NOT o.processed AND o.id = nx.id`

// The statements of Record, with their arguments numbered.
var (
	recordStmt    = mustNamed(RecordSQL)
	recordFanStmt = mustNamed(RecordFanSQL)
	lockLanesStmt = mustNamed(LockLanesSQL)
	promoteStmt   = mustNamed(PromoteSQL)
)

// recordArgs are RecordSQL's arrays for outcomes, in their order. Free
// text (errors) is made valid UTF-8 without NUL characters, which no
// PostgreSQL text can hold: a value the server refused would fail the
// whole batch. marks says the outcome ends the row (ends): marked moves
// it to history. An array of its own, not kind IN (…) in the statement,
// so that the planner takes half the outcomes for marked, not a few in a
// hundred, and hashes them: it compared every outcome with every row
// instead, a cost that grows with the square of the batch.
//
// With outcomes of deliveries without rows (fan is true), it gives
// RecordFanSQL's arrays too; else own is ids, and RecordSQL is the
// statement.
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

// fanArgs adds RecordFanSQL's arrays for outcomes to args: each one's
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
	done, err := retryMoved(ctx, func() (map[int64]bool, error) {
		done := make(map[int64]bool, len(outcomes))
		var id int64
		// One round trip, one transaction: with keyed rows, the lanes'
		// locks before the record and the lanes moved on after it.
		var b pgx.Batch
		if len(keys) > 0 {
			b.Queue(lockLanesStmt.sql, lock...)
		}
		b.Queue(stmt.sql, args...).Query(func(rows pgx.Rows) error {
			_, err := pgx.ForEachRow(rows, []any{&id}, func() error { done[id] = true; return nil })
			return err
		})
		if len(keys) > 0 {
			b.Queue(promoteStmt.sql, promote...)
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
