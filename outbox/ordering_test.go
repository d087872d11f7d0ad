package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// claimAll claims with room for everything and returns the rows by
// payload (the test's event names).
func claimAll(t *testing.T, s *outbox.Store, env bool) map[string]webhook.Delivery {
	t.Helper()
	b, err := s.Claim(context.Background(), webhook.Query{Limit: 100, Lease: time.Minute, DefaultRoom: 100, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]webhook.Delivery{}
	for _, r := range b.Rows {
		out[r.EndpointName+":"+string(r.Payload)] = r
	}
	return out
}

// record writes one outcome of kind for r.
func record(t *testing.T, s *outbox.Store, r webhook.Delivery, kind webhook.Kind) {
	t.Helper()
	o := webhook.Outcome{ID: r.ID, Token: r.Token, Kind: kind, Attempt: r.Attempt, Health: webhook.Healthy, Started: time.Now(),
		Event: r.Event, EndpointID: r.EndpointID}
	switch kind {
	case webhook.Retry:
		o.Attempt, o.Health, o.Error = r.Attempt+1, webhook.Failing, "http 503"
	case webhook.Dead:
		o.Health, o.Error = webhook.Failing, "http 400"
	}
	if w, err := s.Record(context.Background(), []webhook.Outcome{o}); err != nil || !w[0] {
		t.Fatalf("record %s of %s: %v %v", kind, r.Payload, w, err)
	}
}

// keyed inserts an event for endpoint (NULL: an event to fan out) with
// payload name and key.
func keyed(t *testing.T, db *testdb.DB, endpoint, name, key string) {
	t.Helper()
	var ep, k any
	if endpoint != "" {
		ep = endpoint
	}
	if key != "" {
		k = key
	}
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, ordering_key) VALUES ('order.paid', $1::jsonb, $2, $3)`,
		fmt.Sprintf("%q", name), ep, k)
}

// names lists what a claim took, as "endpoint:payload" with the key's
// sequence, for messages.
func names(m map[string]webhook.Delivery) map[string]int64 {
	out := map[string]int64{}
	for k, r := range m {
		out[k] = r.Sequence
	}
	return out
}

// A lane delivers one row at a time in its order: the head's retry keeps
// its place, a delivered or dead-lettered head lets the next one go, and
// rows without a key and other keys are never held back.
func TestOrderingOneAtATimePerKey(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ep := endpoint(t, db, "shop", true)
	for i := 1; i <= 3; i++ {
		keyed(t, db, ep, fmt.Sprint("a", i), "order-a")
	}
	keyed(t, db, ep, "b1", "order-b")
	keyed(t, db, ep, "u1", "")

	got := claimAll(t, s, false)
	a1, b1, u1 := got[`shop:"a1"`], got[`shop:"b1"`], got[`shop:"u1"`]
	if len(got) != 3 || a1.Sequence != 1 || a1.OrderingKey != "order-a" || b1.Sequence != 1 || u1.OrderingKey != "" {
		t.Fatalf("first claim took %v, want a1 (seq 1), b1 (seq 1) and u1", names(got))
	}
	if again := claimAll(t, s, false); len(again) != 0 {
		t.Fatalf("a claim while the heads are in flight took %v, want nothing", names(again))
	}

	record(t, s, a1, webhook.Done)
	got = claimAll(t, s, false)
	a2 := got[`shop:"a2"`]
	if len(got) != 1 || a2.Sequence != 2 {
		t.Fatalf("after a1 was delivered the claim took %v, want a2 (seq 2)", names(got))
	}
	// A retry keeps the head's place: a3 stays behind it.
	record(t, s, a2, webhook.Retry)
	exec(t, db, `UPDATE webhook_outbox SET created_at = now() WHERE NOT processed AND attempt = 2`)
	got = claimAll(t, s, false)
	a2r := got[`shop:"a2"`]
	if len(got) != 1 || a2r.Attempt != 2 || a2r.Sequence != 2 {
		t.Fatalf("after a2's retry fell due the claim took %v, want a2's second attempt (seq 2)", names(got))
	}
	// A dead letter moves the key on ('move-on', the default) and says it
	// broke the order.
	record(t, s, a2r, webhook.Dead)
	got = claimAll(t, s, false)
	if a3 := got[`shop:"a3"`]; len(got) != 1 || a3.Sequence != 3 {
		t.Fatalf("after a2 died the claim took %v, want a3 (seq 3)", names(got))
	}
	dls, err := s.DeadLetters(context.Background(), outbox.DeadLetterQuery{Limit: 10})
	if err != nil || len(dls) != 1 || dls[0].OrderingKey != "order-a" || dls[0].Sequence != 2 || !dls[0].OrderBroken {
		t.Fatalf("a2's dead letter: %+v, %v; want key order-a, sequence 2, order broken", dls, err)
	}
}

// With ordering 'hold', a dead head holds its key (new events included)
// until it is replayed, and goes first again; a purge lets the key go on.
func TestOrderingHoldUntilReplayedOrPurged(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ep := endpoint(t, db, "ledger", true)
	exec(t, db, `UPDATE webhook_endpoints SET ordering = 'hold' WHERE id = $1`, ep)
	keyed(t, db, ep, "a1", "acct")
	keyed(t, db, ep, "a2", "acct")
	a1 := claimAll(t, s, false)[`ledger:"a1"`]
	record(t, s, a1, webhook.Dead)
	keyed(t, db, ep, "a3", "acct")
	if got := claimAll(t, s, false); len(got) != 0 {
		t.Fatalf("with a1 dead under hold the claim took %v, want nothing", names(got))
	}

	if _, err := s.Replay(context.Background(), outbox.ReplayFilter{Endpoint: "ledger"}); err != nil {
		t.Fatal(err)
	}
	got := claimAll(t, s, false)
	if r := got[`ledger:"a1"`]; len(got) != 1 || r.Sequence != 1 {
		t.Fatalf("after the replay the claim took %v, want a1 again (seq 1)", names(got))
	}
	record(t, s, got[`ledger:"a1"`], webhook.Done)
	a2 := claimAll(t, s, false)[`ledger:"a2"`]
	if a2.Sequence != 2 {
		t.Fatal("a2 did not follow the replayed a1")
	}
	record(t, s, a2, webhook.Dead)
	if got := claimAll(t, s, false); len(got) != 0 {
		t.Fatalf("with a2 dead under hold the claim took %v, want nothing", names(got))
	}
	if _, err := s.PurgeDeadLetters(context.Background(), time.Now().Add(time.Minute), "ledger"); err != nil {
		t.Fatal(err)
	}
	got = claimAll(t, s, false)
	if r := got[`ledger:"a3"`]; len(got) != 1 || r.Sequence != 3 {
		t.Fatalf("after the purge the claim took %v, want a3 (seq 3)", names(got))
	}
}

// Fanned out, each endpoint gets its own order of a key's events, with
// its own sequence; so does the WEBHOOK_URL endpoint.
func TestOrderingFanOutPerEndpoint(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	endpoint(t, db, "one", true)
	endpoint(t, db, "two", true)
	for i := 1; i <= 3; i++ {
		keyed(t, db, "", fmt.Sprint("e", i), "k")
	}
	seen := map[string][]int64{}
	for round := 0; round < 20 && len(seen["one"])+len(seen["two"])+len(seen[""]) < 9; round++ {
		got := claimAll(t, s, true)
		per := map[string]int{}
		for _, r := range got {
			if per[r.EndpointName]++; per[r.EndpointName] > 1 {
				t.Fatalf("round %d: two rows of one lane in flight at once: %v", round, names(got))
			}
			want := int64(len(seen[r.EndpointName]) + 1)
			if r.Sequence != want || string(r.Payload) != fmt.Sprintf(`"e%d"`, want) {
				t.Fatalf("round %d: %s got %s seq %d, want e%d seq %d", round, r.EndpointName, r.Payload, r.Sequence, want, want)
			}
			seen[r.EndpointName] = append(seen[r.EndpointName], r.Sequence)
			record(t, s, r, webhook.Done)
		}
	}
	for _, name := range []string{"one", "two", ""} {
		if len(seen[name]) != 3 {
			t.Errorf("endpoint %q got %v, want 3 events in order", name, seen[name])
		}
	}
}

// BlockedKeys counts, by endpoint, the keys whose head cannot go now: its
// retry is later, or a dead letter holds the key ('hold', or the
// WEBHOOK_URL endpoint's, by its name); a key whose head is due, and one
// with nothing waiting, are not blocked.
func TestBlockedKeys(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	shop := endpoint(t, db, "shop", true)
	ledger := endpoint(t, db, "ledger", true)
	exec(t, db, `UPDATE webhook_endpoints SET ordering = 'hold' WHERE id = $1`, ledger)
	for _, k := range []string{"retrying", "flowing"} {
		keyed(t, db, shop, k+"1", k)
		keyed(t, db, shop, k+"2", k)
	}
	keyed(t, db, shop, "alone1", "alone")
	// retrying's head failed: its retry is an hour away.
	exec(t, db, `UPDATE webhook_outbox SET created_at = now() + interval '1 hour'
		WHERE NOT processed AND ordering_key IN ('retrying', 'alone') AND NOT held`)
	keyed(t, db, ledger, "h1", "held")
	keyed(t, db, ledger, "h2", "held")
	record(t, s, claimAll(t, s, false)[`ledger:"h1"`], webhook.Dead)
	// A dead letter of the WEBHOOK_URL endpoint holds its key.
	exec(t, db, `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_error, ordering_key, ordering_seq)
		VALUES (gen_random_uuid(), 'e', '{}', 1, 'http 500', 'url-key', 1)`)

	got, err := s.BlockedKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"ledger": 1, "shop": 1, outbox.DefaultEndpointName: 1}
	if len(got) != len(want) {
		t.Fatalf("blocked keys %+v, want %v", got, want)
	}
	for _, b := range got {
		if b.Keys != want[b.Endpoint] || b.OldestSecs < 0 {
			t.Errorf("%s: %d keys blocked (oldest %.1fs), want %d", b.Endpoint, b.Keys, b.OldestSecs, want[b.Endpoint])
		}
	}
}
