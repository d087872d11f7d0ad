package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/outbox"
)

// The store names the WEBHOOK_URL endpoint as the worker, the catalog and
// the schema's webhook_endpoint_name (which the store's reads call) do.
func TestDefaultEndpointName(t *testing.T) {
	t.Parallel()
	_, db := setup(t)
	var schema string
	if err := db.Pool.QueryRow(context.Background(), "SELECT webhook_endpoint_name(NULL, NULL)").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{dispatcher.DefaultEndpointName, endpoints.DefaultName, schema} {
		if name != outbox.DefaultEndpointName {
			t.Fatalf("outbox %q, elsewhere %q", outbox.DefaultEndpointName, name)
		}
	}
}

// The status counts as due exactly the rows a claim takes: a
// pending row whose time has come, unleased or whose lease expired; not one
// leased, scheduled or processed.
func TestStatusCountsDueAsTheClaim(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	ep := endpoint(t, db, "shop", true)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at, locked_until, lease_token, processed, processed_at, reclaims) VALUES
		('e', '{}', $1, now() - interval '1 minute', NULL, NULL, false, NULL, 0),
		('e', '{}', $1, now() - interval '1 minute', now() - interval '1 second', gen_random_uuid(), false, NULL, 1),
		('e', '{}', $1, now() - interval '1 minute', now() + interval '1 minute', gen_random_uuid(), false, NULL, 0),
		('e', '{}', $1, now() + interval '1 hour', NULL, NULL, false, NULL, 0),
		('e', '{}', $1, now() - interval '1 minute', NULL, NULL, true, now(), 2)`, ep)
	q, err := s.QueueStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.PendingDue != 2 || q.InFlight != 1 || q.ScheduledRetries != 1 || q.ProcessedLastHour != 1 || q.LeasesReclaimed != 3 || q.OldestPendingSecs < 60 {
		t.Fatalf("status %+v", q)
	}
	eps, err := s.EndpointStatus(ctx, false, "")
	if err != nil || len(eps) != 1 || eps[0].Name != "shop" || eps[0].Pending != 2 || eps[0].InFlight != 1 || eps[0].Scheduled != 1 ||
		eps[0].URL != "https://h.example.com/shop" {
		t.Fatalf("endpoints %+v, %v", eps, err)
	}
	b, err := s.Claim(ctx, webhook.Query{Limit: 100, Lease: time.Minute})
	if err != nil || len(b.Rows) != int(q.PendingDue) {
		t.Fatalf("the claim took %d rows, the status said %d due (%v)", len(b.Rows), q.PendingDue, err)
	}
}

// The WEBHOOK_URL endpoint is listed first when configured or when it has
// rows; only names one endpoint; none is an empty list.
func TestEndpointStatusDefault(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	if eps, err := s.EndpointStatus(ctx, false, ""); err != nil || eps == nil || len(eps) != 0 {
		t.Fatalf("no endpoints: %#v, %v", eps, err)
	}
	if eps, err := s.EndpointStatus(ctx, true, ""); err != nil || len(eps) != 1 || eps[0].Name != outbox.DefaultEndpointName || eps[0].URL != "" {
		t.Fatalf("configured: %+v, %v", eps, err)
	}
	endpoint(t, db, "shop", true)
	deadLetter(t, db, uuidOf(1), "", time.Now(), false)
	eps, err := s.EndpointStatus(ctx, false, "")
	if err != nil || len(eps) != 2 || eps[0].Name != outbox.DefaultEndpointName || eps[0].DeadLetters != 1 || eps[1].Name != "shop" {
		t.Fatalf("with a dead letter of its own: %+v, %v", eps, err)
	}
	if eps, err := s.EndpointStatus(ctx, false, "shop"); err != nil || len(eps) != 1 || eps[0].Name != "shop" {
		t.Fatalf("only shop: %+v, %v", eps, err)
	}
}

// Every read of the operator commands works with times out of range in
// every table (a database whose time constraints were dropped): the
// times read are clamped.
func TestReadsWithTimesOutOfRange(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	db.DropTimeRanges(t)
	ep := endpoint(t, db, "shop", true)
	exec(t, db, "UPDATE webhook_endpoints SET failing_since = '-infinity', last_error = 'x', last_error_at = 'infinity'")
	exec(t, db, `INSERT INTO webhook_outbox (delivery_id, event_type, payload, endpoint_id, created_at) VALUES
		($1, 'e', '{}', $2, '-infinity'), ($3, 'e', '{}', $2, '0001-01-01 00:00:00+00 BC')`, uuidOf(1), ep, uuidOf(2))
	exec(t, db, `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_error, endpoint_id, died_at)
		VALUES ($1, 'e', '{}', 1, 'x', $2, 'infinity')`, uuidOf(3), ep)
	exec(t, db, `INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms)
		VALUES ($1, $2, 1, '-infinity', 1)`, uuidOf(1), ep)
	if _, err := s.QueueStatus(ctx); err != nil {
		t.Errorf("status: %v", err)
	}
	if eps, err := s.EndpointStatus(ctx, true, ""); err != nil || len(eps) != 2 || eps[1].FailingSince == nil || eps[1].LastErrorAt == nil {
		t.Errorf("endpoint status: %+v, %v", eps, err)
	}
	if list, err := s.DeadLetters(ctx, outbox.DeadLetterQuery{Limit: 10}); err != nil || len(list) != 1 || !list[0].DiedAt.Before(outbox.MaxTime) {
		t.Errorf("dead letters: %+v, %v", list, err)
	}
	for _, id := range []string{uuidOf(1), uuidOf(2), uuidOf(3)} {
		list, st, err := s.Attempts(ctx, id)
		if err != nil || st.State == outbox.StateUnknown {
			t.Errorf("attempts %s: %+v %+v, %v", id, list, st, err)
		}
	}
}

// A delivery's state: pending with its next attempt, dead-lettered with
// its reason, delivered when its last attempt was, an event fanned out,
// unknown when nothing is left.
func TestDeliveryState(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	exec(t, db, `INSERT INTO webhook_outbox (delivery_id, event_type, payload, attempt, processed, processed_at, fanout) VALUES
		($1, 'e', '{}', 2, false, NULL, NULL), ($2, 'e', '{}', 1, true, now(), NULL), ($3, 'e', '{}', 1, true, now(), 4)`,
		uuidOf(1), uuidOf(2), uuidOf(3))
	exec(t, db, `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status, error_class, error) VALUES
		($1, 1, now() - interval '1 minute', 5, 503, 'retryable', 'http 503'), ($2, 1, now(), 5, 200, NULL, NULL)`, uuidOf(1), uuidOf(2))
	deadLetter(t, db, uuidOf(4), "", time.Now(), false)
	for _, c := range []struct {
		id, state string
		attempts  int
	}{
		{uuidOf(1), outbox.StatePending, 1}, {uuidOf(2), outbox.StateDelivered, 1}, {uuidOf(3), outbox.StateFannedOut, 0},
		{uuidOf(4), outbox.StateDeadLetter, 0}, {uuidOf(5), outbox.StateUnknown, 0},
	} {
		list, st, err := s.Attempts(ctx, c.id)
		if err != nil || st.State != c.state || len(list) != c.attempts || list == nil {
			t.Errorf("%s: %+v %+v, %v (want %s, %d attempts)", c.id, list, st, err, c.state, c.attempts)
		}
	}
	if _, st, _ := s.Attempts(ctx, uuidOf(1)); st.NextAttempt != 2 || st.DueAt == nil {
		t.Errorf("pending: %+v", st)
	}
	if _, st, _ := s.Attempts(ctx, uuidOf(3)); st.FanOut != 4 {
		t.Errorf("fanned out: %+v", st)
	}
	if _, st, _ := s.Attempts(ctx, uuidOf(4)); st.Reason != "http 500" {
		t.Errorf("dead letter: %+v", st)
	}
}
