package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// deliveries gives the endpoint id pending deliveries with headers: one
// due, one under a live lease (attempt 3), and one processed row.
func deliveries(t *testing.T, db *testdb.DB, id string) {
	t.Helper()
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, headers) VALUES ('e', '{"n": 1}', $1, '{"x-tenant": "t1"}')`, id)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, headers, locked_until, lease_token, attempt)
		VALUES ('e', '{"n": 2}', $1, '{"x-tenant": "t2"}', now() + interval '1 minute', gen_random_uuid(), 3)`, id)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, processed, processed_at) VALUES ('e', '{}', $1, true, now())`, id)
}

// Removing an endpoint leaves it and its rows alone while deliveries are
// pending, unless forced; forced, every pending delivery, the leased one
// too, goes to the dead letter with its event, endpoint and headers, and
// its history stays.
func TestRemoveEndpoint(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	id, other := endpoint(t, db, "old", true), endpoint(t, db, "other", true)
	deliveries(t, db, id)
	deliveries(t, db, other)

	r, err := s.RemoveEndpoint(ctx, "old", false)
	if err != nil || r != (outbox.Removed{Pending: 2}) {
		t.Fatalf("without force: %+v, %v; want 2 pending, nothing removed", r, err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id = $1", id); n != 3 {
		t.Fatalf("without force: %d rows left of 3", n)
	}
	r, err = s.RemoveEndpoint(ctx, "old", true)
	if err != nil || r != (outbox.Removed{Pending: 2, Moved: 2, Removed: true}) {
		t.Fatalf("forced: %+v, %v", r, err)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1 AND last_error = 'endpoint old removed'
		AND headers->>'x-tenant' = 't' || (payload->>'n') AND attempts = CASE payload->>'n' WHEN '1' THEN 0 ELSE 2 END`, id); n != 2 {
		t.Fatalf("%d dead letters kept event, endpoint, headers and attempts, want 2", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE headers->>'x-tenant' <> 't' || (payload->>'n')"); n != 0 {
		t.Fatalf("%d dead letters with another event's headers", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND endpoint_id = $1", id) + db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE id = $1", id); n != 0 {
		t.Fatalf("%d pending rows of the removed endpoint left", n)
	}
	// Its history stays until retention drops it (migration 013).
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed AND endpoint_id = $1", id); n != 1 {
		t.Fatalf("%d processed rows of the removed endpoint kept, want 1", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id = $1", other); n != 3 {
		t.Fatalf("the other endpoint's rows: %d of 3", n)
	}
	if _, err := s.RemoveEndpoint(ctx, "old", true); !errors.Is(err, outbox.ErrEndpointNotFound) {
		t.Fatalf("again: %v, want ErrEndpointNotFound", err)
	}
}

// Disabling moves the pending deliveries no live lease holds, with their
// headers (webhook_endpoint_disable), and says whether the endpoint was
// enabled; an unknown id, one not a uuid and an unknown name are not found.
func TestDisableEndpoint(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	id := endpoint(t, db, "shop", true)
	deliveries(t, db, id)

	d, err := s.DisableEndpoint(ctx, id, "410 Gone")
	if err != nil || d != (outbox.Disabled{Moved: 1, WasEnabled: true}) {
		t.Fatalf("first: %+v, %v", d, err)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1 AND headers = '{"x-tenant": "t1"}'
		AND last_error = 'endpoint shop disabled: 410 Gone'`, id); n != 1 {
		t.Fatalf("%d dead letters with the headers and the reason, want 1", n)
	}
	if d, err := s.DisableEndpointByName(ctx, "shop", "by hand"); err != nil || d != (outbox.Disabled{}) {
		t.Fatalf("again, by name: %+v, %v; want nothing moved, not enabled before", d, err)
	}
	for _, f := range []func() error{
		func() error { _, err := s.DisableEndpoint(ctx, "not-a-uuid", "r"); return err },
		func() error {
			_, err := s.DisableEndpoint(ctx, "11111111-1111-4111-8111-111111111111", "r")
			return err
		},
		func() error { _, err := s.DisableEndpointByName(ctx, "ghost", "r"); return err },
	} {
		if err := f(); !errors.Is(err, outbox.ErrEndpointNotFound) {
			t.Errorf("%v, want ErrEndpointNotFound", err)
		}
	}
}

// The janitor's disable checks again under the lock: an endpoint no longer
// failing is left alone; one still failing gets the reason made of its
// failing_since.
func TestDisableFailingEndpoint(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	down, healed := endpoint(t, db, "down", true), endpoint(t, db, "healed", true)
	exec(t, db, "UPDATE webhook_endpoints SET failing_since = now() - interval '2 hours'")
	ids, err := s.FailingEndpoints(ctx, time.Hour)
	if err != nil || len(ids) != 2 || ids[0] != down || ids[1] != healed {
		t.Fatalf("failing: %v, %v; want [down healed] by name", ids, err)
	}
	exec(t, db, "UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1", healed)
	reason := func(since time.Time) string { return "since " + since.UTC().Format(time.RFC3339Nano) }
	if _, ok, err := s.DisableFailingEndpoint(ctx, healed, time.Hour, reason); ok || err != nil {
		t.Fatalf("healed: ok %v, %v; want left alone", ok, err)
	}
	d, ok, err := s.DisableFailingEndpoint(ctx, down, time.Hour, reason)
	if !ok || err != nil || d.Name != "down" {
		t.Fatalf("down: %+v %v %v", d, ok, err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE NOT enabled AND disabled_reason = $1 AND failing_since = $2", reason(d.Since), d.Since); n != 1 {
		t.Fatalf("down is not disabled with the reason of its failing_since %s", d.Since)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE enabled"); n != 1 {
		t.Fatalf("%d endpoints enabled, want healed only", n)
	}
}

// A rotation to the current secret changes nothing.
func TestRotateToTheSameSecret(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	endpoint(t, db, "shop", true)
	same := func(id, current string) (outbox.Rotation, error) {
		if current == "whsec_x" {
			return outbox.Rotation{}, outbox.ErrSameSecret
		}
		return outbox.Rotation{Secret: "whsec_x", Previous: current}, nil
	}
	if _, err := s.RotateEndpointSecret(context.Background(), "shop", same, time.Hour); !errors.Is(err, outbox.ErrSameSecret) {
		t.Fatalf("%v, want ErrSameSecret", err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE secret = 'whsec_x' AND secret_previous IS NULL AND secret_previous_until IS NULL"); n != 1 {
		t.Fatal("the refused rotation changed the secrets")
	}
}

// An endpoint added with no event types reads back with an empty, non-nil
// list, and the catalog's reads return it.
func TestAddEndpointReadsBack(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	e, err := s.AddEndpoint(ctx, outbox.EndpointFields{Name: "shop", URL: "https://h.example.com/", Secret: "whsec_x"})
	if err != nil || e.EventTypes == nil || len(e.EventTypes) != 0 || e.RetryRPS != 0 || !e.Enabled {
		t.Fatalf("added %+v, %v", e, err)
	}
	if got, err := s.Endpoint(ctx, "shop"); err != nil || got.ID != e.ID {
		t.Fatalf("read %+v, %v", got, err)
	}
	if _, err := s.Endpoint(ctx, "ghost"); !errors.Is(err, outbox.ErrEndpointNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	if list, err := s.Endpoints(ctx); err != nil || len(list) != 1 || list[0].ID != e.ID {
		t.Fatalf("list %+v, %v", list, err)
	}
}
