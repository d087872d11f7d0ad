package outbox_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// stepArgs are a claim's parameters: 10 rows, a WEBHOOK_URL endpoint.
var stepArgs = pgx.NamedArgs{"limit": 10, "lease_ms": 30000, "skip": []string{}, "room": map[string]int{},
	"default_room": 10, "env_room": 10, "env": true}

// runStep runs the claim's step name in tx and returns the states of its
// rows, by id.
func runStep(t *testing.T, tx pgx.Tx, name string) map[int64]string {
	t.Helper()
	var text string
	for _, s := range outbox.ClaimStatements() {
		if s[0] == name {
			text = s[1]
		}
	}
	rows, err := tx.Query(context.Background(), text, stepArgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToMap)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	states := map[int64]string{}
	for _, r := range got {
		id, _ := r["id"].(int64)
		state, _ := r["state"].(string)
		states[id] = state
	}
	return states
}

// told is the tally the steps have left in tx (fluxora.claim).
func told(t *testing.T, tx pgx.Tx) map[string]json.RawMessage {
	t.Helper()
	var s *string
	if err := tx.QueryRow(context.Background(), "SELECT nullif(current_setting('fluxora.claim', true), '')").Scan(&s); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	if s != nil {
		if err := json.Unmarshal([]byte(*s), &out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// stepFixture holds a delivery of endpoint a's queue, a delivery of the
// WEBHOOK_URL endpoint's, an event no endpoint of the table takes and one
// that a takes.
type stepFixture struct {
	db                       *testdb.DB
	queued, env, plain, fans int64
}

func newStepFixture(t *testing.T) stepFixture {
	t.Helper()
	_, db := setup(t)
	a := endpoint(t, db, "a", true)
	exec(t, db, `UPDATE webhook_endpoints SET event_types = '{fans}'`)
	f := stepFixture{db: db}
	ctx := context.Background()
	for _, r := range []struct {
		id  *int64
		sql string
	}{
		{&f.queued, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id) VALUES ('fans', '{}', '` + a + `') RETURNING id`},
		{&f.env, `INSERT INTO webhook_outbox (event_type, payload, fanout) VALUES ('plain', '{}', 1) RETURNING id`},
		{&f.plain, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('plain', '{}') RETURNING id`},
		{&f.fans, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('fans', '{}') RETURNING id`},
	} {
		if err := db.Pool.QueryRow(ctx, r.sql).Scan(r.id); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Each step of the claim runs alone and does its own part: the queues'
// step leases the queues' deliveries and no event; the events' step
// finishes the event no table endpoint takes and hands the other on; the
// fan-out's step makes the deliveries of what it is handed, and nothing
// without it.
func TestClaimStepsRunAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newStepFixture(t)
	t.Run("queues", func(t *testing.T) {
		tx, err := f.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		got := runStep(t, tx, "claim_queues")
		if len(got) != 2 || got[f.queued] != "queue" || got[f.env] != "queue" {
			t.Errorf("claim_queues: %v, want the queue's and the WEBHOOK_URL endpoint's deliveries", got)
		}
		if tally := told(t, tx); string(tally["taken"]) != "2" || string(tally["env"]) != "1" {
			t.Errorf("tally after claim_queues: %v", tally)
		}
	})
	t.Run("events", func(t *testing.T) {
		tx, err := f.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		got := runStep(t, tx, "claim_events")
		if len(got) != 2 || got[f.plain] != "event_leased" || got[f.fans] != "to_fan_out" {
			t.Errorf("claim_events: %v, want the plain event leased and the other handed on", got)
		}
		if tally := told(t, tx); string(tally["events"]) != "["+strconv.FormatInt(f.fans, 10)+"]" {
			t.Errorf("tally after claim_events: %v", tally)
		}
	})
	t.Run("fan-out handed nothing", func(t *testing.T) {
		tx, err := f.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if got := runStep(t, tx, "claim_fan_out"); len(got) != 0 {
			t.Errorf("claim_fan_out alone: %v, want nothing", got)
		}
	})
	t.Run("fan-out handed an event", func(t *testing.T) {
		tx, err := f.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if _, err := tx.Exec(ctx, `SELECT set_config('fluxora.claim', jsonb_build_object('events', jsonb_build_array($1::bigint))::text, true)`,
			f.fans); err != nil {
			t.Fatal(err)
		}
		got := runStep(t, tx, "claim_fan_out")
		fresh := 0
		for _, s := range got {
			if s == "fresh" {
				fresh++
			}
		}
		if got[f.fans] != "event_leased" || fresh != 1 || len(got) != 2 {
			t.Errorf("claim_fan_out: %v, want the event leased (the WEBHOOK_URL endpoint's) and a's delivery made", got)
		}
	})
}

// While the claims find no event due they run the queues' step alone. A
// claim that then finds one due beside its queues' rows takes those and
// asks for another claim at once (More), which fans the event out; one
// that finds only the event runs every step there and then. An event
// waits at most one claim, never a wake.
func TestClaimRunsTheEventStepsOnceAnEventIsDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	a := endpoint(t, db, "a", true)
	toA := func(n int) {
		t.Helper()
		exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id) SELECT 'x', '{}', $1 FROM generate_series(1, $2)`, a, n)
	}
	event := func() { exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('x', '{}')`) }
	q := webhook.Query{Limit: 10, Lease: time.Minute, DefaultRoom: 10}
	claim := func(step string, rows, fanned int, more bool) {
		t.Helper()
		b, err := s.Claim(ctx, q)
		if err != nil || len(b.Rows) != rows || b.FannedOut != fanned || b.More != more {
			t.Fatalf("%s: %+v, %v; want %d rows, %d fanned out, more %v", step, b, err, rows, fanned, more)
		}
	}
	toA(3)
	claim("the queue", 3, 0, false)
	toA(2)
	event()
	claim("the queue beside an event come due", 2, 0, true)
	claim("the claim after it", 1, 1, false)
	toA(1)
	claim("the queue again", 1, 0, false)
	event()
	claim("an event alone", 1, 1, false)
}

// While the claims find no delivery in any queue (each event a fan-out in
// flight, nothing waiting) they leave the queues' step out. A delivery
// written to a queue meanwhile is taken at most one claim later: beside an
// event, the claim takes the event and asks for another at once (More);
// alone, the claim runs every step there and then.
func TestClaimLeavesTheQueuesOutWhileTheyHoldNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	a := endpoint(t, db, "a", true)
	event := func() { exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('x', '{}')`) }
	toA := func() {
		exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id) VALUES ('x', '{}', $1)`, a)
	}
	q := webhook.Query{Limit: 10, Lease: time.Minute, DefaultRoom: 10}
	claim := func(step string, queue, inFlight int, more, leftOut bool) webhook.Batch {
		t.Helper()
		b, err := s.Claim(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		gotQueue, gotInFlight := 0, 0
		for _, r := range b.Rows {
			if r.Event != 0 {
				gotInFlight++
			} else {
				gotQueue++
			}
		}
		if gotQueue != queue || gotInFlight != inFlight || b.More != more || outbox.QueuesLeftOut(s) != leftOut {
			t.Fatalf("%s: %d from the queue, %d in flight, more %v, queues left out next %v; want %d, %d, %v, %v",
				step, gotQueue, gotInFlight, b.More, outbox.QueuesLeftOut(s), queue, inFlight, more, leftOut)
		}
		return b
	}
	event()
	recordDone(t, s, claim("the first event (every step)", 0, 1, false, true))
	event()
	recordDone(t, s, claim("an event, the queues left out", 0, 1, false, true))
	event()
	toA()
	claim("an event beside a delivery come to a's queue", 0, 1, true, false)
	recordDone(t, s, claim("the claim after it, every step", 1, 0, false, false))
	event()
	recordDone(t, s, claim("an event again", 0, 1, false, true))
	toA()
	recordDone(t, s, claim("a delivery alone", 1, 0, false, false))
}

// A claim leaves a step out while the claim before found work for the
// other alone. After a claim that found nothing anywhere, the next runs
// what the last such wake called for: every step at first; the events'
// steps alone after events, the queues' step alone after a queue's
// delivery. What the guess left out is still taken by that claim (a
// second round trip), and the next guess follows it.
func TestClaimAfterFindingNothingGuessesFromTheLastWake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db := setup(t)
	a := endpoint(t, db, "a", true)
	q := webhook.Query{Limit: 10, Lease: time.Minute, DefaultRoom: 10}
	every := []string{"claim_queues", "claim_events", "claim_fan_out"}
	queues, events := every[:1], every[1:]
	claim := func(step string, rows int, next []string) webhook.Batch {
		t.Helper()
		b, err := s.Claim(ctx, q)
		if err != nil || len(b.Rows) != rows {
			t.Fatalf("%s: %+v, %v; want %d rows", step, b, err, rows)
		}
		if got := outbox.NextSteps(s); !slices.Equal(got, next) {
			t.Fatalf("%s: the next claim runs %v, want %v", step, got, next)
		}
		return b
	}
	event := func() { exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('x', '{}')`) }
	toA := func() {
		exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id) VALUES ('x', '{}', $1)`, a)
	}
	for _, c := range []struct {
		write []func()
		step  string
		rows  int
		more  bool // the claim asks for the next at once
		next  []string
	}{
		{nil, "nothing anywhere", 0, false, every},
		{[]func(){event}, "an event, fanned out in flight", 1, false, events},
		{nil, "nothing after the event", 0, false, events},
		{[]func(){event}, "the next event", 1, false, events},
		{nil, "nothing again", 0, false, events},
		{[]func(){toA}, "a delivery in a's queue, guessed wrong", 1, false, queues},
		{nil, "nothing after the delivery", 0, false, queues},
		{[]func(){toA}, "the next delivery", 1, false, queues},
		{nil, "nothing after it", 0, false, queues},
		{[]func(){event}, "an event, guessed wrong", 1, false, events},
		{nil, "nothing after that event", 0, false, events},
		{[]func(){event, toA}, "an event and a delivery: the event", 1, true, every},
		{nil, "the delivery, at once", 1, false, queues},
		{nil, "nothing after both", 0, false, events},
	} {
		for _, w := range c.write {
			w()
		}
		b := claim(c.step, c.rows, c.next)
		if b.More != c.more {
			t.Fatalf("%s: more %v, want %v", c.step, b.More, c.more)
		}
		recordDone(t, s, b)
	}
}

// recordDone records every row of b delivered.
func recordDone(t *testing.T, s *outbox.Store, b webhook.Batch) {
	t.Helper()
	outs := make([]webhook.Outcome, len(b.Rows))
	for i, r := range b.Rows {
		outs[i] = webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Done, Event: r.Event, EndpointID: r.EndpointID}
	}
	if _, err := s.Record(context.Background(), outs); err != nil {
		t.Fatal(err)
	}
}
