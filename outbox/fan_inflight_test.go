package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// written tallies the outcomes the store wrote, by delivery id.
type written struct {
	mu         sync.Mutex
	done, dead map[string]int
	attempts   int // written outcomes that record an attempt
	inFlight   int // rows claimed without a row of their own (Event set)
}

func (w *written) add(rows []webhook.Delivery, outcomes []webhook.Outcome, ok []bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, o := range outcomes {
		if !ok[i] {
			continue
		}
		switch o.Kind {
		case webhook.Done:
			w.done[rows[i].DeliveryID]++
		case webhook.Dead:
			w.dead[rows[i].DeliveryID]++
		}
		if o.Health != webhook.NoAttempt {
			w.attempts++
		}
	}
}

// Workers fan events out to several endpoints with every outcome at
// random (delivered, retried, dead-lettered, released, deferred), written
// one at a time or together, while some claims "crash": their lease is
// short and some of their rows get no outcome, so that their events are
// claimed again once the lease ends, and fanned out again to the endpoints
// whose deliveries had no outcome written. Every delivery (an event and
// an endpoint subscribed to it) ends delivered or dead-lettered exactly
// once, as the store wrote it, every event is processed with its fan-out
// counted, and every written attempt is on record.
func TestFanOutInFlightRandomInterleavings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := setup(t)
	s := workerStore(t, db)
	for _, name := range []string{"a", "b", "c"} {
		endpoint(t, db, name, true)
	}
	exec(t, db, `UPDATE webhook_endpoints SET event_types = '{x}' WHERE name = 'c'`)
	endpoint(t, db, "off", false)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const events, first = 150, 12
	insert := func(i int) {
		typ := "x"
		if i%3 == 0 {
			typ = "y"
		}
		exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2::jsonb)`, typ, fmt.Sprintf(`{"n": %d}`, i))
	}
	for i := range first {
		insert(i)
	}
	var producing sync.WaitGroup
	producing.Go(func() {
		for i := first; i < events; i++ {
			insert(i)
		}
	})

	w := &written{done: map[string]int{}, dead: map[string]int{}}
	done := make(chan struct{})
	var working sync.WaitGroup
	stop := sync.OnceFunc(func() { close(done); working.Wait() })
	defer stop() // also when the wait below fails the test
	for n := range 3 {
		working.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(n+1)))
			// Worker 0 crashes whole claims until one held a delivery
			// without a row, so that a fan-out in flight is always taken
			// over.
			whole := n == 0
			for {
				select {
				case <-done:
					return
				default:
				}
				crash := whole || rng.IntN(10) == 0
				q := webhook.Query{Limit: 1 + rng.IntN(12), Lease: time.Minute, DefaultRoom: 4}
				if crash {
					q.Limit, q.Lease = 12, 200*time.Millisecond
				}
				b, err := s.Claim(ctx, q)
				if err != nil {
					t.Error(err)
					return
				}
				var rows []webhook.Delivery
				dropped := false
				for _, r := range b.Rows {
					if r.Event != 0 {
						w.mu.Lock()
						w.inFlight++
						w.mu.Unlock()
					}
					if !crash || !whole && rng.IntN(2) == 0 {
						rows = append(rows, r)
					} else {
						dropped = dropped || r.Event != 0
					}
				}
				whole = whole && !dropped
				rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
				together := rng.IntN(2) == 0
				var batch []webhook.Outcome
				var batchRows []webhook.Delivery
				flush := func() bool {
					if len(batch) == 0 {
						return true
					}
					ok, err := s.Record(ctx, batch)
					if err != nil {
						t.Error(err)
						return false
					}
					w.add(batchRows, batch, ok)
					batch, batchRows = nil, nil
					return true
				}
				for _, r := range rows {
					o := webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Done, Attempt: r.Attempt, Health: webhook.Healthy,
						Started: time.Now(), Event: r.Event, EndpointID: r.EndpointID}
					switch k := rng.IntN(20); {
					case k < 3:
						o.Kind, o.Attempt, o.Health, o.Error = webhook.Retry, r.Attempt+1, webhook.Failing, "http 503"
					case k < 4:
						o.Kind, o.Health, o.Error = webhook.Dead, webhook.Failing, "http 400"
					case k < 5:
						o.Kind, o.Health = webhook.Release, webhook.NoAttempt
					case k < 6:
						o.Kind, o.Health, o.Delay = webhook.Defer, webhook.NoAttempt, 5*time.Millisecond
					}
					batch, batchRows = append(batch, o), append(batchRows, r)
					if !together && !flush() {
						return
					}
				}
				if !flush() {
					return
				}
				if b.Taken == 0 && len(b.Rows) == 0 {
					time.Sleep(5 * time.Millisecond) // nothing due: as the worker waits for a notification
				}
			}
		})
	}
	producing.Wait()
	waitfor.True(t, 2*time.Minute, "every row processed", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	stop()

	// Every delivery the events' subscriptions call for, by its id.
	rows, err := db.Pool.Query(ctx, `SELECT md5(e.delivery_id::text || '/' || p.id::text)::uuid::text
		FROM webhook_outbox e JOIN webhook_endpoints p ON p.enabled AND (cardinality(p.event_types) = 0 OR e.event_type = ANY(p.event_types))
		WHERE e.endpoint_id IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != events/3*2+events*2 { // a and b every event, c the x ones
		t.Fatalf("%d deliveries expected from the subscriptions", len(want))
	}
	ended := 0
	for _, id := range want {
		if n := w.done[id] + w.dead[id]; n != 1 {
			t.Errorf("delivery %s: delivered %d times, dead-lettered %d times, want once in all", id, w.done[id], w.dead[id])
		}
		ended += w.done[id] + w.dead[id]
	}
	if got := len(w.done) + len(w.dead); got != ended {
		t.Errorf("%d deliveries ended, %d of them of the events' subscriptions", got, ended)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != len(w.dead) {
		t.Errorf("%d dead letters, %d written", n, len(w.dead))
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_attempts"); n != w.attempts {
		t.Errorf("%d attempts on record, %d written", n, w.attempts)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox e WHERE e.endpoint_id IS NULL AND (NOT e.processed OR e.fanout IS DISTINCT FROM
		(SELECT count(*) FROM webhook_endpoints p WHERE p.enabled AND (cardinality(p.event_types) = 0 OR e.event_type = ANY(p.event_types))))`); n != 0 {
		t.Errorf("%d events not processed with their fan-out counted", n)
	}
	// Both ways of fanning out ran: deliveries handed out without rows,
	// and events claimed again after a crash.
	if w.inFlight == 0 {
		t.Error("no delivery was handed out without a row of its own")
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND fan_to IS NOT NULL AND reclaims > 0"); n == 0 {
		t.Error("no event fanned out in flight was claimed again after its lease ended")
	}
}

// A fan-out in flight: no delivery row until its outcome, counted in
// flight by `worker status` (the queue's and each endpoint's), and an
// outcome for an endpoint removed meanwhile writes no row (its rows went
// with it) but still counts towards its event's end.
func TestFanOutInFlightStatusAndRemovedEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	a, b := endpoint(t, db, "a", true), endpoint(t, db, "b", true)
	endpoint(t, db, "c", true)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('x', '{"n": 1}')`)
	batch, err := s.Claim(ctx, webhook.Query{Limit: 10, Lease: time.Minute, DefaultRoom: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Rows) != 3 || batch.FannedOut != 1 || batch.Deliveries != 3 || batch.Fresh != 3 {
		t.Fatalf("claim: %+v", batch)
	}
	byName := map[string]webhook.Delivery{}
	for _, r := range batch.Rows {
		if r.Event == 0 {
			t.Fatalf("delivery with a row of its own: %+v", r)
		}
		byName[r.EndpointName] = r
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NOT NULL"); n != 0 {
		t.Fatalf("%d delivery rows before their outcomes", n)
	}
	inFlight := func(want map[string]int64, total int64) {
		t.Helper()
		q, err := s.QueueStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q.InFlight != total || q.PendingDue != 0 {
			t.Errorf("queue: in flight %d, due %d; want %d, 0", q.InFlight, q.PendingDue, total)
		}
		eps, err := s.EndpointStatus(ctx, false, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eps {
			if e.InFlight != want[e.Name] || e.Pending != 0 {
				t.Errorf("endpoint %s: in flight %d, due %d; want %d, 0", e.Name, e.InFlight, e.Pending, want[e.Name])
			}
		}
	}
	inFlight(map[string]int64{"a": 1, "b": 1, "c": 1}, 3)
	if _, st, err := s.Attempts(ctx, byName["b"].DeliveryID); err != nil || st.State != outbox.StateInFlight || st.NextAttempt != 1 {
		t.Errorf("b's delivery: %+v, %v; want in flight, attempt 1", st, err)
	}
	if row, ok, err := s.DeliveryRow(ctx, byName["b"].DeliveryID, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 100); err != nil || !ok ||
		row.Where != outbox.StateInFlight || row.PayloadPreview != `{"n": 1}` {
		t.Errorf("b's delivery in the console: %+v, %v, %v", row, ok, err)
	}

	outcome := func(r webhook.Delivery, k webhook.Kind) webhook.Outcome {
		return webhook.Outcome{ID: r.ID, Token: r.Token, Kind: k, Attempt: 1, Health: webhook.Healthy, Event: r.Event, EndpointID: r.EndpointID}
	}
	if ok, err := s.Record(ctx, []webhook.Outcome{outcome(byName["a"], webhook.Done)}); err != nil || !ok[0] {
		t.Fatalf("record a: %v %v", ok, err)
	}
	inFlight(map[string]int64{"b": 1, "c": 1}, 2)
	if _, st, err := s.Attempts(ctx, byName["a"].DeliveryID); err != nil || st.State != outbox.StateDelivered {
		t.Errorf("a's delivery: %+v, %v; want delivered", st, err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed AND endpoint_id = $1 AND delivery_id = $2", a, byName["a"].DeliveryID); n != 1 {
		t.Fatalf("a's delivery in the history: %d rows", n)
	}

	exec(t, db, "DELETE FROM webhook_endpoints WHERE id = $1", b)
	ok, err := s.Record(ctx, []webhook.Outcome{outcome(byName["b"], webhook.Done), outcome(byName["c"], webhook.Done)})
	if err != nil || !ok[0] || !ok[1] {
		t.Fatalf("record b (removed) and c: %v %v", ok, err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NOT NULL"); n != 2 {
		t.Errorf("%d delivery rows, want a's and c's", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND processed AND fanout = 3"); n != 1 {
		t.Errorf("event not processed with its fan-out of 3")
	}
	// A second outcome for the same delivery: its event has ended.
	if ok, err := s.Record(ctx, []webhook.Outcome{outcome(byName["a"], webhook.Done)}); err != nil || ok[0] {
		t.Errorf("outcome after the event ended: written %v, %v", ok, err)
	}
}

// The deliveries of fan-outs in flight carry their own event's payload and
// headers (sent once per event by the claim).
func TestFanOutInFlightCarriesEachEventsBody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	endpoint(t, db, "a", true)
	endpoint(t, db, "b", true)
	for i := range 4 {
		exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, headers) VALUES ('x', $1::jsonb, $2::jsonb)`,
			fmt.Sprintf(`{"n": %d}`, i), fmt.Sprintf(`{"x-n": "%d"}`, i))
	}
	b, err := s.Claim(ctx, webhook.Query{Limit: 8, Lease: time.Minute, DefaultRoom: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 8 {
		t.Fatalf("claim: %+v", b)
	}
	seen := map[string]int{}
	for _, r := range b.Rows {
		var p struct{ N int }
		var h map[string]string
		if r.Event == 0 || json.Unmarshal(r.Payload, &p) != nil || json.Unmarshal(r.Headers, &h) != nil || h["x-n"] != fmt.Sprint(p.N) {
			t.Fatalf("delivery %+v: payload %s, headers %s", r, r.Payload, r.Headers)
		}
		seen[string(r.Payload)]++
	}
	if len(seen) != 4 {
		t.Errorf("payloads: %v, want 4 events twice each", seen)
	}
	for p, n := range seen {
		if n != 2 {
			t.Errorf("payload %s in %d deliveries, want 2", p, n)
		}
	}
}

// An event whose fan-out in flight outlived its lease is fanned out again
// to the deliveries made then and not ended: not to an endpoint whose
// outcome was written, nor to one added since, and still to one disabled
// or unsubscribed since (a disabled endpoint's row is taken, for the
// worker to dead-letter it with the reason); never to one removed.
func TestFanOutInFlightTakenOverKeepsItsDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	ids := map[string]string{}
	for _, name := range []string{"done", "disabled", "unsubscribed", "removed", "kept"} {
		ids[name] = endpoint(t, db, name, true)
	}
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('x', '{}')`)
	b, err := s.Claim(ctx, webhook.Query{Limit: 10, Lease: time.Minute, DefaultRoom: 10})
	if err != nil || len(b.Rows) != 5 {
		t.Fatalf("claim: %+v, %v", b, err)
	}
	var done webhook.Delivery
	for _, r := range b.Rows {
		if r.EndpointName == "done" {
			done = r
		}
	}
	if ok, err := s.Record(ctx, []webhook.Outcome{{ID: done.ID, Token: done.Token, Kind: webhook.Done, Attempt: 1, Health: webhook.Healthy,
		Event: done.Event, EndpointID: done.EndpointID}}); err != nil || !ok[0] {
		t.Fatalf("record: %v %v", ok, err)
	}
	exec(t, db, `UPDATE webhook_endpoints SET enabled = false WHERE name = 'disabled'`)
	exec(t, db, `UPDATE webhook_endpoints SET event_types = '{y}' WHERE name = 'unsubscribed'`)
	exec(t, db, `DELETE FROM webhook_endpoints WHERE name = 'removed'`)
	endpoint(t, db, "added", true)
	endLease(t, db)
	b, err = s.Claim(ctx, webhook.Query{Limit: 10, Lease: time.Minute, DefaultRoom: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range b.Rows {
		if r.Event != 0 {
			t.Errorf("taken over as a fan-out in flight again: %+v", r)
		}
		got[r.EndpointName] = r.Enabled
	}
	if len(got) != 3 || got["disabled"] || !got["unsubscribed"] || !got["kept"] {
		t.Errorf("deliveries made again: %v, want disabled (not enabled), unsubscribed and kept", got)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND processed AND fanout = 5 AND reclaims = 1"); n != 1 {
		t.Errorf("event not processed with its fan-out of 5 after the take-over")
	}
}

// A fan-out in flight left behind by a configuration with endpoints (its
// lease ended), claimed by a worker that now has only the WEBHOOK_URL
// endpoint and no enabled endpoint in the table: the plain path leaves it
// to the claim's steps, which make the delivery owed to the endpoint
// disabled since (taken, for the worker to dead-letter it) beside the
// WEBHOOK_URL endpoint's.
func TestFanOutInFlightLeftToTheURLEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	endpoint(t, db, "a", true)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('x', '{}')`)
	b, err := s.Claim(ctx, webhook.Query{Limit: 10, Lease: time.Minute, DefaultRoom: 10})
	if err != nil || len(b.Rows) != 1 || b.Rows[0].Event == 0 {
		t.Fatalf("claim: %+v, %v", b, err)
	}
	exec(t, db, `UPDATE webhook_endpoints SET enabled = false`)
	// Another event, while the first is still in flight: the claim takes
	// it on its own and opens the plain path.
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('x', '{}')`)
	q := webhook.Query{Limit: 10, Lease: time.Minute, Env: true}
	if b, err = s.Claim(ctx, q); err != nil || len(b.Rows) != 1 || b.Rows[0].EndpointID != "" || !outbox.PlainOpen(s) {
		t.Fatalf("claim of the second event: %+v, %v, plain path open %v", b, err, outbox.PlainOpen(s))
	}
	endLease(t, db)
	if b, err = s.Claim(ctx, q); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range b.Rows {
		got[r.EndpointName] = r.Enabled
	}
	if len(got) != 2 || got["a"] || !got[""] {
		t.Fatalf("deliveries: %v, want a's (disabled) and the WEBHOOK_URL endpoint's", got)
	}
}

// endLease ends the lease of every fan-out in flight, as the clock would
// (a worker that stopped).
func endLease(t *testing.T, db *testdb.DB) {
	t.Helper()
	exec(t, db, `UPDATE webhook_outbox SET locked_until = now() - interval '1 second'
		WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NULL AND fan_to IS NOT NULL`)
}
