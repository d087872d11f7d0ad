package outbox_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

const testHeaders = `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "X-Correlation-Id": "c-42"}`

// sameHeaders reports whether the JSON object text got holds the headers of
// testHeaders.
func sameHeaders(t *testing.T, got []byte) bool {
	t.Helper()
	var a, b map[string]string
	if err := json.Unmarshal(got, &a); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(testHeaders), &b); err != nil {
		t.Fatal(err)
	}
	return maps.Equal(a, b)
}

// An event's headers are returned with its row, copied into each delivery
// of its fan-out, into each retry and deferral, and into its dead letter; a
// row without headers has nil.
func TestHeadersTravelWithTheEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	c := newClaimant(t, db, 100, 30*time.Second, true)
	newEndpoint(t, db, "a")
	newEndpoint(t, db, "b")
	if _, err := db.Pool.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload, headers) VALUES ('x', '{}', $1)", testHeaders); err != nil {
		t.Fatal(err)
	}
	db.Insert(t, "plain", `{}`)

	// The two events' own rows (WEBHOOK_URL deliveries) and the four
	// endpoint deliveries, leased by the same claim.
	b := claimQ(t, c, webhook.Query{})
	if len(b.Rows) != 6 || b.Deliveries != 4 || b.Fresh != 4 {
		t.Fatalf("first claim: %+v", b)
	}
	var outcomes []webhook.Outcome
	for _, r := range b.Rows {
		if r.EventType == "x" && !sameHeaders(t, r.Headers) || r.EventType == "plain" && r.Headers != nil {
			t.Fatalf("delivery of %s to %q: headers %q", r.EventType, r.EndpointName, r.Headers)
		}
		if r.EndpointID == "" {
			continue
		}
		kind := webhook.Retry
		if r.EndpointName == "b" {
			kind = webhook.Dead
		}
		outcomes = append(outcomes, webhook.Outcome{ID: r.ID, Token: r.Token, Kind: kind, Attempt: 2, Error: "http 503"})
	}
	write(t, c, outcomes...)
	b = claimQ(t, c, webhook.Query{}) // the retries to a
	if len(b.Rows) != 2 {
		t.Fatalf("third claim: %+v", b)
	}
	for _, r := range b.Rows {
		if r.Attempt != 2 || r.EventType == "x" && !sameHeaders(t, r.Headers) || r.EventType == "plain" && r.Headers != nil {
			t.Fatalf("retry of %s: attempt %d, headers %q", r.EventType, r.Attempt, r.Headers)
		}
	}
	var dead []byte
	if err := db.Pool.QueryRow(ctx, "SELECT headers::text FROM webhook_dead_letter WHERE event_type = 'x'").Scan(&dead); err != nil || !sameHeaders(t, dead) {
		t.Fatalf("dead letter headers %q, %v", dead, err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE event_type = 'plain' AND headers IS NULL"); n != 1 {
		t.Fatalf("%d dead letters of the plain event without headers", n)
	}
}

// Disabling an endpoint keeps the headers in the dead letters it makes.
func TestDisableKeepsHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	id := newEndpoint(t, db, "a")
	if _, err := db.Pool.Exec(ctx, "SELECT webhook_enqueue('x', '{}', 'a', $1::jsonb)", testHeaders); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "SELECT webhook_endpoint_disable($1, 'test')", id); err != nil {
		t.Fatal(err)
	}
	var dead []byte
	if err := db.Pool.QueryRow(ctx, "SELECT headers::text FROM webhook_dead_letter").Scan(&dead); err != nil || !sameHeaders(t, dead) {
		t.Fatalf("dead letter headers %q, %v", dead, err)
	}
}
