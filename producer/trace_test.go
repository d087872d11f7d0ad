package producer_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/producer"
)

// callerSpan is a context holding the caller's span context (as an
// instrumented handler's would), with tracestate state ("" for none).
func callerSpan(t *testing.T, state string) (context.Context, string) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
}

// storedHeaders is the headers of the event of delivery id, as stored.
func storedHeaders(t *testing.T, db *testdb.DB, id string) map[string]string {
	t.Helper()
	var text sql.NullString
	if err := db.Pool.QueryRow(context.Background(), "SELECT headers::text FROM webhook_outbox WHERE delivery_id = $1", id).Scan(&text); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	if text.Valid {
		if err := json.Unmarshal([]byte(text.String), &out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Enqueue writes the caller's trace (from ctx) into the event's headers,
// beside the caller's own, through pgx and database/sql; a traceparent the
// caller gives wins; without a span context nothing is added.
func TestEnqueueWritesTheCallersTrace(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, tp := callerSpan(t, "vendor=opaque")
	plain, _ := callerSpan(t, "")
	sqlDB, err := sql.Open("pgx", db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	enqueueSQL := func(ctx context.Context, opts ...producer.Option) (string, error) {
		tx, err := sqlDB.BeginTx(ctx, nil)
		if err != nil {
			return "", err
		}
		id, err := producer.EnqueueSQL(ctx, tx, "e", []byte(`{}`), opts...)
		if err != nil {
			return "", err
		}
		return id, tx.Commit()
	}
	own := "00-11111111111111111111111111111111-2222222222222222-01"
	for _, tc := range []struct {
		name    string
		enqueue func() (string, error)
		want    map[string]string
	}{
		{"pgx", func() (string, error) {
			return producer.Enqueue(ctx, db.Pool, "e", []byte(`{}`), producer.WithHeaders(map[string]string{"X-Correlation-Id": "c"}))
		}, map[string]string{"traceparent": tp, "tracestate": "vendor=opaque", "X-Correlation-Id": "c"}},
		{"database/sql", func() (string, error) { return enqueueSQL(plain) }, map[string]string{"traceparent": tp}},
		{"the caller's traceparent wins", func() (string, error) {
			return producer.EnqueueJSON(ctx, db.Pool, "e", 1, producer.WithHeaders(map[string]string{"Traceparent": own}))
		}, map[string]string{"Traceparent": own}},
		{"the caller's tracestate wins", func() (string, error) {
			return producer.Enqueue(ctx, db.Pool, "e", []byte(`{}`), producer.WithHeaders(map[string]string{"tracestate": "mine=1"}))
		}, map[string]string{"traceparent": tp, "tracestate": "mine=1"}},
		{"no span context", func() (string, error) {
			return producer.Enqueue(context.Background(), db.Pool, "e", []byte(`{}`))
		}, map[string]string{}},
	} {
		id, err := tc.enqueue()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := storedHeaders(t, db, id); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: headers %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The trace is never why an event is refused: with the caller's headers at
// their limit, it is left out.
func TestEnqueueLeavesTheTraceOutWithoutRoom(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, _ := callerSpan(t, "")
	h := map[string]string{}
	for i := range 16 {
		h[fmt.Sprintf("x-h%d", i)] = "v"
	}
	id, err := producer.Enqueue(ctx, db.Pool, "e", []byte(`{}`), producer.WithHeaders(h))
	if err != nil {
		t.Fatal(err)
	}
	if got := storedHeaders(t, db, id); len(got) != 16 || got["traceparent"] != "" {
		t.Fatalf("headers %v, want the caller's 16 alone", got)
	}
}
