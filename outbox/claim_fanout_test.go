package outbox_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

func newEndpoint(t *testing.T, db *testdb.DB, name string, events ...string) string {
	t.Helper()
	if events == nil {
		events = []string{}
	}
	var id string
	err := db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret, event_types)
		VALUES ($1, 'https://hooks.example.com/' || $1, 'whsec_' || $1, $2) RETURNING id::text`, name, events).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// fanSetup returns a claimant of batch 10 without a WEBHOOK_URL endpoint
// and its database, with n endpoints k0… subscribed to every type.
func fanSetup(t *testing.T, n int) (claimant, *testdb.DB) {
	t.Helper()
	db := testdb.New(t)
	c := newClaimant(t, db, 10, 30*time.Second, false)
	for i := range n {
		newEndpoint(t, db, "k"+strconv.Itoa(i))
	}
	return c, db
}

func TestFanOut(t *testing.T) {
	t.Parallel()

	t.Run("once per event, to subscribed enabled endpoints, in one statement", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		c := newClaimant(t, db, 100, 30*time.Second, false)
		a := newEndpoint(t, db, "a", "x")
		newEndpoint(t, db, "b")
		off := newEndpoint(t, db, "off")
		if _, err := db.Pool.Exec(context.Background(), "UPDATE webhook_endpoints SET enabled = false WHERE id = $1", off); err != nil {
			t.Fatal(err)
		}
		db.Insert(t, "x", `{"n":1}`)
		db.Insert(t, "y", `{"n":2}`)
		// The deliveries that fit (the endpoints' room, the claim's limit)
		// are leased by the same claim, without rows of their own yet: the
		// events are leased, and processed (no WEBHOOK_URL endpoint) once
		// every delivery's outcome is written; never fanned out again.
		b := claimQ(t, c, webhook.Query{})
		if b.FannedOut != 2 || b.Deliveries != 3 || b.Fresh != 3 || len(b.Rows) != 3 || b.Taken != 2 || b.More || len(b.Unrouted) != 0 {
			t.Fatalf("first claim: %+v", b)
		}
		ids := map[string]bool{}
		for _, r := range b.Rows {
			if r.EndpointID == "" || r.URL != "https://hooks.example.com/"+r.EndpointName || r.Secret != "whsec_"+r.EndpointName || !r.Enabled {
				t.Fatalf("row without its endpoint: %+v", r)
			}
			if r.EndpointID == a && r.EventType != "x" {
				t.Fatalf("endpoint a got %s", r.EventType)
			}
			ids[r.DeliveryID] = true
		}
		if len(ids) != 3 {
			t.Fatalf("delivery ids not distinct: %v", ids)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NOT NULL"); n != 0 {
			t.Fatalf("%d delivery rows written before their outcomes", n)
		}
		if b := claimQ(t, c, webhook.Query{}); b.Taken != 0 || len(b.Rows) != 0 {
			t.Fatalf("claim while the fan-out is in flight took %+v", b)
		}
		for _, r := range b.Rows {
			write(t, c, outcome(r, webhook.Done))
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NOT NULL AND processed AND attempt = 1"); n != 3 {
			t.Fatalf("%d delivery rows in the history, want 3", n)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND processed AND fanout IN (1, 2)"); n != 2 {
			t.Fatalf("%d events recorded fanned out", n)
		}
		if b := claimQ(t, c, webhook.Query{}); b.Taken != 0 || len(b.Rows) != 0 {
			t.Fatalf("second claim took %+v", b)
		}
	})

	t.Run("deliveries beyond an endpoint's room or the limit are left pending", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		c := newClaimant(t, db, 100, 30*time.Second, false)
		a := newEndpoint(t, db, "a")
		newEndpoint(t, db, "b")
		db.Insert(t, "x", `{}`, `{}`, `{}`)
		b := claimQ(t, c, webhook.Query{Room: map[string]int{a: 2}, DefaultRoom: 1})
		if b.FannedOut != 3 || b.Deliveries != 6 || b.Fresh != 3 || len(b.Rows) != 3 || !b.More {
			t.Fatalf("first claim: %+v", b)
		}
		per := map[string]int{}
		for _, r := range b.Rows {
			per[r.EndpointName]++
		}
		if per["a"] != 2 || per["b"] != 1 {
			t.Fatalf("leased per endpoint %v, want a 2, b 1", per)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NOT NULL AND NOT processed AND lease_token IS NULL"); n != 3 {
			t.Fatalf("%d deliveries left pending, want 3", n)
		}
		b = claimQ(t, c, webhook.Query{Limit: 2})
		if len(b.Rows) != 2 || b.Fresh != 0 || b.Taken != 2 {
			t.Fatalf("second claim (limit 2): %+v", b)
		}
		if b := claimQ(t, c, webhook.Query{}); len(b.Rows) != 1 {
			t.Fatalf("third claim: %+v", b)
		}
	})

	t.Run("with only the WEBHOOK_URL endpoint, events are taken only as its room allows, after its pending deliveries", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		c := newClaimant(t, db, 100, 30*time.Second, true)
		for range 30 {
			db.Insert(t, "x", `{}`)
		}
		unfanned := func() int {
			return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND fanout IS NULL")
		}
		// The event row is the endpoint's delivery: one it cannot lease
		// now is left an event, not updated twice (fanned out, then
		// leased by a later claim).
		if b := claimQ(t, c, webhook.Query{EnvRoom: 10}); len(b.Rows) != 10 || b.FannedOut != 10 || !b.More {
			t.Fatalf("claim with room for 10: %d rows, taken %d, fanned out %d, more %v", len(b.Rows), b.Taken, b.FannedOut, b.More)
		}
		if n := unfanned(); n != 20 {
			t.Fatalf("events left as they were: %d, want 20", n)
		}
		// At its cap, the claim touches no event and says nothing is left
		// that it could take (a slot given back claims again).
		if b := claimQ(t, c, webhook.Query{SkipEnv: true}); b.Taken != 0 || b.FannedOut != 0 || b.More {
			t.Fatalf("claim at its cap: %d rows, taken %d, fanned out %d, more %v", len(b.Rows), b.Taken, b.FannedOut, b.More)
		}
		if n := unfanned(); n != 20 {
			t.Fatalf("events after the claim at its cap: %d, want 20", n)
		}
		// Its pending deliveries (the ten above, their leases given back)
		// come first; the claim then fans out only what is left of its
		// limit.
		if _, err := db.Pool.Exec(context.Background(), "UPDATE webhook_outbox SET locked_until = NULL, lease_token = NULL WHERE fanout IS NOT NULL AND NOT processed"); err != nil {
			t.Fatal(err)
		}
		if b := claimQ(t, c, webhook.Query{Limit: 15}); len(b.Rows) != 15 || b.Taken != 15 || b.FannedOut != 5 {
			t.Fatalf("claim of 15 beside 10 pending deliveries: %d rows, taken %d, fanned out %d, more %v", len(b.Rows), b.Taken, b.FannedOut, b.More)
		}
		if n := unfanned(); n != 15 {
			t.Fatalf("events left after the claim of 15: %d, want 15", n)
		}
	})

	t.Run("an event's deliveries are all leased when their rooms allow; no more events than the limit can lease", func(t *testing.T) {
		t.Parallel()
		c, db := fanSetup(t, 10)
		for range 6 {
			db.Insert(t, "x", `{}`)
		}
		// A claim of ten fans out one event, all ten of its deliveries
		// leased; the other five events are left as they were.
		b := claimQ(t, c, webhook.Query{DefaultRoom: 25})
		if b.FannedOut != 1 || b.Deliveries != 10 || b.Fresh != 10 || len(b.Rows) != 10 || !b.More {
			t.Fatalf("claim of 10: %+v", b)
		}
		per := map[string]int{}
		for _, r := range b.Rows {
			per[r.EndpointName]++
		}
		if len(per) != 10 {
			t.Fatalf("leased per endpoint %v, want one for each of the ten", per)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NOT NULL AND NOT processed AND lease_token IS NULL"); n != 0 {
			t.Fatalf("%d deliveries left pending, want none", n)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND fanout IS NULL AND NOT processed AND lease_token IS NULL"); n != 5 {
			t.Fatalf("%d events untouched, want 5", n)
		}
		// A claim of forty: four events, forty deliveries, all leased.
		b = claimQ(t, c, webhook.Query{Limit: 40, DefaultRoom: 25})
		if b.FannedOut != 4 || b.Deliveries != 40 || b.Fresh != 40 || len(b.Rows) != 40 {
			t.Fatalf("claim of 40: %+v", b)
		}
		// A claim smaller than one event's fan-out still fans it out (fan-out
		// never stalls): what does not fit is left pending.
		b = claimQ(t, c, webhook.Query{Limit: 3, DefaultRoom: 25})
		if b.FannedOut != 1 || b.Deliveries != 10 || b.Fresh != 3 || !b.More {
			t.Fatalf("claim of 3: %+v", b)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NOT NULL AND NOT processed AND lease_token IS NULL"); n != 7 {
			t.Fatalf("%d deliveries left pending, want 7", n)
		}
	})

	t.Run("a lone event fanned out and leased whole: no more is left", func(t *testing.T) {
		t.Parallel()
		c, db := fanSetup(t, 10)
		db.Insert(t, "x", `{}`)
		// One event fits a claim of ten; More would cost an empty claim
		// (and the hush's busy) for every event of a sparse stream.
		if b := claimQ(t, c, webhook.Query{DefaultRoom: 25}); b.FannedOut != 1 || b.Fresh != 10 || b.More {
			t.Fatalf("claim: %+v", b)
		}
	})

	t.Run("events for one endpoint each: as many events as the limit", func(t *testing.T) {
		t.Parallel()
		c, db := fanSetup(t, 0)
		newEndpoint(t, db, "a", "x")
		newEndpoint(t, db, "b", "y")
		for range 8 {
			db.Insert(t, "x", `{}`)
			db.Insert(t, "y", `{}`)
		}
		b := claimQ(t, c, webhook.Query{DefaultRoom: 25})
		if b.FannedOut != 10 || b.Deliveries != 10 || b.Fresh != 10 || !b.More {
			t.Fatalf("claim: %+v", b)
		}
	})

	t.Run("deliveries to a skipped endpoint are made pending and count for nothing", func(t *testing.T) {
		t.Parallel()
		c, db := fanSetup(t, 0)
		newEndpoint(t, db, "a")
		b := newEndpoint(t, db, "b")
		db.Insert(t, "x", `{}`, `{}`, `{}`)
		got := claimQ(t, c, webhook.Query{Limit: 2, Skip: []string{b}, DefaultRoom: 25})
		if got.FannedOut != 2 || got.Deliveries != 4 || got.Fresh != 2 || !got.More {
			t.Fatalf("claim: %+v", got)
		}
		for _, r := range got.Rows {
			if r.EndpointName != "a" {
				t.Fatalf("a skipped endpoint's delivery leased: %+v", r)
			}
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id = $1 AND NOT processed AND lease_token IS NULL", b); n != 2 {
			t.Fatalf("%d of b's deliveries pending, want 2", n)
		}
	})

	t.Run("with a WEBHOOK_URL endpoint the event row is its delivery", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		c := newClaimant(t, db, 10, 30*time.Second, true)
		newEndpoint(t, db, "b")
		db.Insert(t, "x", `{}`)
		b := claimQ(t, c, webhook.Query{})
		if len(b.Rows) != 2 || b.Rows[0].EndpointID != "" || b.Deliveries != 1 || b.Fresh != 1 || b.FannedOut != 1 {
			t.Fatalf("claim: %+v", b)
		}
		event := b.Rows[0]
		if b.Rows[1].DeliveryID == event.DeliveryID {
			t.Fatalf("endpoint delivery reuses the event's id")
		}
		// Its retry is the same delivery, never fanned out again.
		write(t, c, webhook.Outcome{ID: event.ID, Token: event.Token, Kind: webhook.Retry, Attempt: 2})
		b = claimQ(t, c, webhook.Query{})
		if len(b.Rows) != 1 || b.FannedOut != 0 {
			t.Fatalf("second claim: %+v", b)
		}
		for _, r := range b.Rows {
			if r.EndpointID == "" && (r.DeliveryID != event.DeliveryID || r.Attempt != 2) {
				t.Fatalf("retry of the env delivery: %+v", r)
			}
			if r.EndpointID != "" && r.DeliveryID == event.DeliveryID {
				t.Fatalf("endpoint delivery reuses the event's id")
			}
		}
	})

	t.Run("concurrent claims fan out each event exactly once", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		c := newClaimant(t, db, 3, 30*time.Second, false)
		for _, n := range []string{"p", "q", "r"} {
			newEndpoint(t, db, n)
		}
		for range 30 {
			db.Insert(t, "x", `{}`)
		}
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				for {
					b, err := c.Claim(context.Background(), c.query(webhook.Query{}))
					if err != nil || b.Taken == 0 {
						errs <- err
						return
					}
					outcomes := make([]webhook.Outcome, len(b.Rows))
					for i, r := range b.Rows {
						outcomes[i] = outcome(r, webhook.Done)
					}
					if _, err := c.Record(context.Background(), outcomes); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NOT NULL"); n != 90 {
			t.Fatalf("%d deliveries, want 90", n)
		}
		if n := db.Count(t, "SELECT count(DISTINCT delivery_id) FROM webhook_outbox WHERE endpoint_id IS NOT NULL"); n != 90 {
			t.Fatalf("%d distinct delivery ids, want 90", n)
		}
	})

	t.Run("unrouted events are recorded processed with fanout 0", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		c := newClaimant(t, db, 10, 30*time.Second, false)
		newEndpoint(t, db, "a", "x")
		db.Insert(t, "y", `{}`, `{}`)
		b := claimQ(t, c, webhook.Query{})
		if len(b.Unrouted) != 2 || b.Unrouted[0] != "y" || b.Deliveries != 0 || b.Taken != 2 {
			t.Fatalf("claim: %+v", b)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed AND fanout = 0"); n != 2 {
			t.Fatalf("%d unrouted rows", n)
		}
	})

	t.Run("skipped endpoints' rows stay pending; events are fanned out anyway", func(t *testing.T) {
		t.Parallel()
		db := testdb.New(t)
		c := newClaimant(t, db, 10, 30*time.Second, true)
		busy := newEndpoint(t, db, "busy")
		newEndpoint(t, db, "free")
		db.Insert(t, "x", `{}`)
		b := claimQ(t, c, webhook.Query{Skip: []string{busy}, SkipEnv: true})
		if len(b.Rows) != 1 || b.Rows[0].EndpointName != "free" || b.FannedOut != 1 || b.Deliveries != 2 || b.Fresh != 1 {
			t.Fatalf("claim: %+v", b)
		}
		if b := claimQ(t, c, webhook.Query{Skip: []string{busy}, SkipEnv: true}); len(b.Rows) != 0 {
			t.Fatalf("second claim: %+v", b)
		}
		b = claimQ(t, c, webhook.Query{})
		if len(b.Rows) != 2 {
			t.Fatalf("unskipped claim: %+v", b)
		}
	})
}

// Record keeps each endpoint's run of failures: set at the first failure,
// cleared by a success, written only on a change.
func TestRecordEndpointHealth(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newClaimant(t, db, 10, time.Minute, false)
	id := newEndpoint(t, db, "h")
	health := func() (failing bool, lastErr string) {
		var since *time.Time
		var e *string
		if err := db.Pool.QueryRow(context.Background(), "SELECT failing_since, last_error FROM webhook_endpoints WHERE id = $1", id).Scan(&since, &e); err != nil {
			t.Fatal(err)
		}
		if e != nil {
			lastErr = *e
		}
		return since != nil, lastErr
	}
	round := func(h webhook.Health, kind webhook.Kind) {
		t.Helper()
		db.Insert(t, "x", `{}`)
		b := claimQ(t, c, webhook.Query{}) // fanned out and leased at once
		if len(b.Rows) != 1 {
			t.Fatalf("claim: %+v", b)
		}
		r := b.Rows[0]
		o := outcome(r, kind)
		o.Attempt, o.Status, o.Error, o.Health = 1, 503, "http 503", h
		write(t, c, o)
	}
	round(webhook.Failing, webhook.Dead)
	if failing, e := health(); !failing || e != "http 503" {
		t.Fatalf("after a failure: failing %v, last error %q", failing, e)
	}
	round(webhook.Healthy, webhook.Done)
	if failing, e := health(); failing || e != "http 503" {
		t.Fatalf("after a success: failing %v, last error %q (kept)", failing, e)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1", id); n != 1 {
		t.Fatalf("dead letter without its endpoint: %d", n)
	}
}
