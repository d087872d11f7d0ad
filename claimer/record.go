package claimer

import (
	"context"
	"fmt"
	"time"
)

// Kind says what becomes of a claimed row.
type Kind int

const (
	// Done marks the row processed: it was delivered.
	Done Kind = iota + 1
	// Retry marks the row processed and inserts its next attempt, due later.
	Retry
	// Defer moves the row itself, the same attempt, to later: its due time
	// (created_at) becomes Delay from now and its lease ends. A gate refused
	// it; no attempt was spent and no row is made.
	Defer
	// Dead marks the row processed and moves the event to
	// webhook_dead_letter.
	Dead
	// Release gives the row back unattempted: its lease ends at once and
	// any worker may claim it (a worker shutting down before sending it).
	Release
)

// Outcome is what Record writes for one claimed row.
type Outcome struct {
	// ID and Token name the row and the lease it was claimed under.
	ID    int64
	Token Token
	Kind  Kind
	// Attempt is the attempt number of the new row (Retry), or the number
	// of attempts made (Dead). A deferred row keeps its own.
	Attempt int
	// Delay is how long after the write, by the database clock, the new
	// row (Retry) or the deferred row (Defer) is due; it is taken within
	// [0, MaxDelay].
	Delay time.Duration
	// Status is the last HTTP status (Dead); 0 is stored as NULL.
	Status int
	// Error is the last error text (Dead; for Retry it feeds the
	// endpoint's health).
	Error string
	// Health is what the attempt says of the row's endpoint: NoAttempt,
	// Healthy or Failing. Only webhook_endpoints rows are updated, and only
	// on a change, so a steady stream writes nothing there. An outcome
	// whose Health is not NoAttempt records its attempt in
	// webhook_attempts: the row's attempt number, Started, Took, Status,
	// AttemptClass and AttemptError.
	Health Health
	// Started is when the HTTP attempt began, by the worker's clock; Took
	// how long it lasted.
	Started time.Time
	Took    time.Duration
	// AttemptClass is "" (delivered), "retryable" or "permanent".
	AttemptClass string
	// AttemptError is the attempt's own error text ("" when delivered).
	AttemptError string
}

// Health is what an attempt says of its endpoint.
type Health int

// The values of Outcome.Health.
const (
	// NoAttempt: nothing was sent (deferred, released, refused).
	NoAttempt Health = iota
	// Healthy: the endpoint answered 2xx; it is failing no longer.
	Healthy
	// Failing: the attempt failed; the endpoint's run of failures goes on
	// (webhook_endpoints.failing_since, last_error).
	Failing
)

// MaxDelay is the longest Outcome.Delay Record writes; a longer one is cut
// to it (and a negative one taken as 0), so that no value can overflow the
// statement's interval and fail the whole batch.
const MaxDelay = 366 * 24 * time.Hour

// recordSQL writes every outcome in one statement. released, deferred and
// marked touch only rows still held under the outcome's token (the fence);
// the retry rows and dead letters come from marked, so they exist exactly
// for the rows marked. A deferral moves the row itself (its created_at is
// the due time the claim orders and filters by) and ends its lease: it
// makes no row and records no attempt. A retry's new attempt copies the
// event and its endpoint from the row, so the payload does not travel back
// to the server. "o.id = ANY($1)" keeps every plan on the primary key,
// whatever the planner guesses of unnest. health updates an endpoint's
// failure run only when it changes (and its last error at most once a
// second), so that a steady stream of outcomes does not write, nor queue
// on, the endpoint's row.
const recordSQL = `WITH r AS (
  SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::int[], $4::int[], $5::bigint[], $6::int[], $7::text[], $8::int[],
      $9::timestamptz[], $10::float8[], $11::text[], $12::text[])
    AS r(id, token, kind, attempt, delay_ms, status, error, health, started, took_ms, try_class, try_error)
), released AS (
  UPDATE webhook_outbox o SET locked_until = NULL, lease_token = NULL
  FROM r
  WHERE r.kind = 5 AND o.id = ANY($1) AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id
), deferred AS (
  UPDATE webhook_outbox o
  SET created_at = clock_timestamp() + r.delay_ms * interval '1 millisecond', locked_until = NULL, lease_token = NULL
  FROM r
  WHERE r.kind = 3 AND o.id = ANY($1) AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id
), marked AS (
  UPDATE webhook_outbox o SET processed = true, processed_at = now()
  FROM r
  WHERE r.kind NOT IN (3, 5) AND o.id = ANY($1) AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id, o.delivery_id, o.event_type, o.payload, o.endpoint_id, o.fanout, o.headers,
    r.kind, r.attempt, r.delay_ms, r.status, r.error, r.health,
    o.attempt AS made, r.started, r.took_ms, r.try_class, r.try_error
), tried AS (
  INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class, error)
  SELECT delivery_id, endpoint_id, made, coalesce(started, clock_timestamp()), took_ms, NULLIF(status, 0), NULLIF(try_class, ''), NULLIF(try_error, '')
  FROM marked WHERE health > 0
), requeued AS (
  INSERT INTO webhook_outbox (delivery_id, event_type, payload, attempt, created_at, endpoint_id, fanout, headers)
  SELECT delivery_id, event_type, payload, attempt, clock_timestamp() + delay_ms * interval '1 millisecond', endpoint_id, fanout, headers
  FROM marked WHERE kind = 2
), dead AS (
  INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id, headers)
  SELECT delivery_id, event_type, payload, attempt, NULLIF(status, 0), error, endpoint_id, headers
  FROM marked WHERE kind = 4
), health AS (
  SELECT endpoint_id, bool_or(health = 1) AS ok,
    max(error) FILTER (WHERE health = 2) AS error, max(NULLIF(status, 0)) FILTER (WHERE health = 2) AS status
  FROM marked WHERE endpoint_id IS NOT NULL AND health > 0
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
)
SELECT id FROM marked UNION ALL SELECT id FROM released UNION ALL SELECT id FROM deferred`

// Record writes outcomes in one statement (one implicit transaction, one
// round trip) and returns, in outcomes order, whether each was written. An
// outcome is not written when its row is no longer held under its token:
// the lease expired and another worker claimed the row (a lost lease). On
// error nothing is written; the rows stay pending and, once their leases
// expire, are claimed again.
func (c *Claimer) Record(ctx context.Context, outcomes []Outcome) (written []bool, err error) {
	n := len(outcomes)
	ids, tokens := make([]int64, n), make([]Token, n)
	kinds, attempts, status := make([]int32, n), make([]int32, n), make([]int32, n)
	delays, errs, health := make([]int64, n), make([]string, n), make([]int32, n)
	started, took, classes, tryErrs := make([]*time.Time, n), make([]float64, n), make([]string, n), make([]string, n)
	for i, o := range outcomes {
		ids[i], tokens[i], kinds[i] = o.ID, o.Token, int32(o.Kind)
		attempts[i], status[i], errs[i] = int32(o.Attempt), int32(o.Status), o.Error
		delays[i] = min(max(o.Delay, 0), MaxDelay).Milliseconds()
		health[i] = int32(o.Health)
		took[i], classes[i], tryErrs[i] = float64(o.Took.Microseconds())/1000, o.AttemptClass, o.AttemptError
		if !o.Started.IsZero() {
			started[i] = &o.Started
		}
	}
	rows, err := c.pool.Query(ctx, recordSQL, ids, tokens, kinds, attempts, delays, status, errs, health, started, took, classes, tryErrs)
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	done := make(map[int64]bool, n)
	var id int64
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("record outcomes: %w", err)
		}
		done[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	written = make([]bool, n)
	for i, o := range outcomes {
		written[i] = done[o.ID]
	}
	return written, nil
}
