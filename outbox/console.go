package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The console's reads: the last hour's figures of every
// endpoint, an endpoint's recent attempts, and a delivery's attempts and
// row found by its delivery id or its event's. Every read of
// webhook_attempts is bounded by started_at, so that its plan holds only
// the partitions of that time; every read of the outbox's history by
// processed_at, for the same reason.

// EndpointHour is one endpoint's attempts of the last hour.
type EndpointHour struct {
	Name      string   `json:"name"` // EndpointNameSQL
	Attempts  int64    `json:"attempts"`
	Succeeded int64    `json:"succeeded"`
	P50MS     *float64 `json:"p50_ms"` // nil: no attempt
	P99MS     *float64 `json:"p99_ms"`
}

// EndpointHourSQL sums the attempts that started at or after @since, by
// endpoint: how many, how many delivered, the median and 99th percentile
// of their durations in milliseconds.
const EndpointHourSQL = `SELECT ` + EndpointNameSQL + `, d.n, d.ok, d.p50, d.p99
FROM (SELECT endpoint_id, count(*) AS n, count(*) FILTER (WHERE error_class IS NULL) AS ok,
        percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
        percentile_cont(0.99) WITHIN GROUP (ORDER BY duration_ms) AS p99
      FROM webhook_attempts WHERE started_at >= @since GROUP BY endpoint_id) d
  LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id`

// EndpointHours reads every endpoint's attempts since since (EndpointHourSQL),
// by endpoint name; an endpoint with none is absent.
func (s *Store) EndpointHours(ctx context.Context, since time.Time) (map[string]EndpointHour, error) {
	rows, err := s.pool.Query(ctx, EndpointHourSQL, pgx.NamedArgs{"since": since})
	if err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	out := map[string]EndpointHour{}
	var h EndpointHour
	_, err = pgx.ForEachRow(rows, []any{&h.Name, &h.Attempts, &h.Succeeded, &h.P50MS, &h.P99MS}, func() error {
		out[h.Name] = h
		h = EndpointHour{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint figures: %w", err)
	}
	return out, nil
}

// DeliveryAttempt is an attempt with its delivery id.
type DeliveryAttempt struct {
	DeliveryID string `json:"delivery_id"`
	Attempt
}

// attemptColumnsSQL is what scanAttempts reads of webhook_attempts d
// joined with webhook_endpoints e.
const attemptColumnsSQL = `d.delivery_id::text, d.attempt, webhook_time_clamp(d.started_at), d.duration_ms, ` + EndpointNameSQL +
	`, d.status, d.error_class, d.error`

func scanAttempts(rows pgx.Rows) ([]DeliveryAttempt, error) {
	out := []DeliveryAttempt{}
	var a DeliveryAttempt
	_, err := pgx.ForEachRow(rows, []any{&a.DeliveryID, &a.Attempt.Attempt, &a.StartedAt, &a.DurationMS, &a.Endpoint,
		&a.Status, &a.ErrorClass, &a.Error}, func() error {
		out = append(out, a)
		a = DeliveryAttempt{}
		return nil
	})
	return out, err
}

// EndpointAttemptsSQL lists the attempts of the endpoint
// (endpointFilterSQL) that started at or after @since, newest first, at
// most @limit.
const EndpointAttemptsSQL = `SELECT ` + attemptColumnsSQL + `
FROM webhook_attempts d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.started_at >= @since AND ` + endpointFilterSQL + `
ORDER BY d.started_at DESC, d.id DESC LIMIT @limit`

// EndpointAttempts lists the attempts of the endpoint named name
// (DefaultEndpointName: the WEBHOOK_URL one) that started at or after
// since, newest first, at most limit (EndpointAttemptsSQL).
func (s *Store) EndpointAttempts(ctx context.Context, name string, since time.Time, limit int) ([]DeliveryAttempt, error) {
	args, err := s.endpointArgs(ctx, name)
	if err != nil {
		return nil, err
	}
	args["since"], args["limit"] = since, limit
	rows, err := s.pool.Query(ctx, EndpointAttemptsSQL, args)
	if err != nil {
		return nil, fmt.Errorf("endpoint attempts: %w", err)
	}
	list, err := scanAttempts(rows)
	if err != nil {
		return nil, fmt.Errorf("endpoint attempts: %w", err)
	}
	return list, nil
}

// SearchAttemptsSQL lists the attempts of the delivery @id, or of the
// deliveries the event @id was fanned out to (their ids are
// md5(event id '/' endpoint id), claim_sql.go), by delivery and oldest
// first. Each id is one probe of the delivery_id index per partition:
// the cost grows with the endpoints and the partitions kept.
const SearchAttemptsSQL = `WITH ids AS (
  SELECT @id::uuid AS id
  UNION ALL SELECT md5(@id::uuid::text || '/' || w.id::text)::uuid FROM webhook_endpoints w)
SELECT ` + attemptColumnsSQL + `
FROM webhook_attempts d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.delivery_id IN (SELECT id FROM ids)
ORDER BY d.delivery_id, d.started_at, d.id`

// SearchAttempts lists the attempts of the delivery id, or of the
// deliveries of the event id (SearchAttemptsSQL).
func (s *Store) SearchAttempts(ctx context.Context, id string) ([]DeliveryAttempt, error) {
	rows, err := s.pool.Query(ctx, SearchAttemptsSQL, pgx.NamedArgs{"id": id})
	if err != nil {
		return nil, fmt.Errorf("search attempts: %w", err)
	}
	list, err := scanAttempts(rows)
	if err != nil {
		return nil, fmt.Errorf("search attempts: %w", err)
	}
	return list, nil
}

// DeliveryRow is what a delivery (or an event) carries, as the console
// shows it: never more than a preview of the payload.
type DeliveryRow struct {
	Where          string            `json:"where"` // StateDeadLetter, StatePending, StateInFlight or "processed"
	EventType      string            `json:"event_type"`
	PayloadPreview string            `json:"payload_preview"`
	PayloadBytes   int               `json:"payload_bytes"`
	Headers        map[string]string `json:"headers"` // the event's own headers
	// OrderingKey and Sequence are the row's ordering_key and
	// ordering_seq ("" and 0 for none; a fan-out in flight has no
	// sequence yet).
	OrderingKey string `json:"ordering_key,omitempty"`
	Sequence    int64  `json:"sequence,omitempty"`
}

// DeliveryRowSQL finds the row of the delivery or event @id: a dead letter
// first, then a pending row (or a delivery of a fan-out in flight, which
// carries its event's payload), then a processed one that was processed in
// [@from, @to] (the time bounds prune the history to its partitions; the
// pending partition has no delivery_id index: it is read whole). The
// payload is cut to @preview characters.
const DeliveryRowSQL = `SELECT r.w, r.event_type, left(r.payload::text, @preview), octet_length(r.payload::text), coalesce(r.headers, '{}'::jsonb),
  coalesce(r.ordering_key, ''), coalesce(r.ordering_seq, 0)
FROM (
  SELECT 'dead_letter' AS w, event_type, payload, headers, ordering_key, ordering_seq, 1 AS rank FROM webhook_dead_letter WHERE delivery_id = @id::uuid
  UNION ALL
  SELECT CASE WHEN locked_until > now() THEN 'in_flight' ELSE 'pending' END, event_type, payload, headers, ordering_key, ordering_seq, 2
  FROM webhook_outbox WHERE NOT processed AND delivery_id = @id::uuid
  UNION ALL
  SELECT CASE WHEN o.locked_until > now() THEN 'in_flight' ELSE 'pending' END, o.event_type, o.payload, o.headers, o.ordering_key, NULL, 2
  FROM ` + fanOutInFlightSQL + ` AND x.delivery_id = @id::uuid
  UNION ALL
  SELECT 'processed', event_type, payload, headers, ordering_key, ordering_seq, 3 FROM webhook_outbox
  WHERE processed AND processed_at >= @from AND processed_at <= @to AND delivery_id = @id::uuid
) r ORDER BY r.rank LIMIT 1`

// DeliveryRow finds the row of the delivery or event id (DeliveryRowSQL),
// its payload cut to preview characters; ok is false when there is none.
func (s *Store) DeliveryRow(ctx context.Context, id string, from, to time.Time, preview int) (DeliveryRow, bool, error) {
	var r DeliveryRow
	err := s.pool.QueryRow(ctx, DeliveryRowSQL, pgx.NamedArgs{"id": id, "from": from, "to": to, "preview": preview}).
		Scan(&r.Where, &r.EventType, &r.PayloadPreview, &r.PayloadBytes, &r.Headers, &r.OrderingKey, &r.Sequence)
	switch {
	case err == pgx.ErrNoRows:
		return DeliveryRow{}, false, nil
	case err != nil:
		return DeliveryRow{}, false, fmt.Errorf("read delivery: %w", err)
	}
	return r, true, nil
}
