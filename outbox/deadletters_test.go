package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// setup gives a store over a fresh migrated database.
func setup(t *testing.T) (*outbox.Store, *testdb.DB) {
	t.Helper()
	db := testdb.New(t)
	s, err := outbox.New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// exec runs a statement of the test's fixture.
func exec(t *testing.T, db *testdb.DB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// endpoint adds an endpoint and returns its id.
func endpoint(t *testing.T, db *testdb.DB, name string, enabled bool) string {
	t.Helper()
	var id string
	err := db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret, enabled)
		VALUES ($1, 'https://h.example.com/' || $1, 'whsec_x', $2) RETURNING id::text`, name, enabled).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// deadLetter adds a dead letter: endpoint id ("" for the WEBHOOK_URL
// endpoint), died at, whether it died before its fan-out.
func deadLetter(t *testing.T, db *testdb.DB, id, endpointID string, diedAt time.Time, fanOut bool) {
	t.Helper()
	var ep any
	if endpointID != "" {
		ep = endpointID
	}
	exec(t, db, `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, headers, attempts, last_error, endpoint_id, died_at, fan_out)
		VALUES ($1, 'e', '{"n": 1}', '{"x-h": "v"}', 3, 'http 500', $2, $3, $4)`, id, ep, diedAt, fanOut)
}

func uuidOf(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// Concurrent replays of the same dead letters, by id and of all of them,
// move each exactly once: none lost, none twice in the outbox.
func TestReplayNeverLosesOrDuplicates(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	ep := endpoint(t, db, "shop", true)
	const n = 200
	died := time.Now().Add(-time.Hour)
	for i := range n {
		e := ""
		if i%2 == 0 {
			e = ep
		}
		deadLetter(t, db, uuidOf(i), e, died, false)
	}
	var wg sync.WaitGroup
	counts := make([]int64, 4)
	errs := make([]error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := outbox.ReplayFilter{}
			if w == 3 {
				f.Endpoint = "shop"
			}
			r, err := s.Replay(ctx, f)
			counts[w], errs[w] = r.Count, err
		}()
	}
	wg.Wait()
	var total int64
	for w := range 4 {
		if errs[w] != nil {
			t.Fatalf("replay %d: %v", w, errs[w])
		}
		total += counts[w]
	}
	if total != n {
		t.Fatalf("the replays moved %d dead letters in all, want %d (%v)", total, n, counts)
	}
	if got := db.Count(t, "SELECT count(*) FROM webhook_outbox"); got != n {
		t.Fatalf("%d rows in the outbox, want %d", got, n)
	}
	if got := db.Count(t, "SELECT count(DISTINCT delivery_id) FROM webhook_outbox"); got != n {
		t.Fatalf("%d distinct delivery ids in the outbox, want %d", got, n)
	}
	if got := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); got != 0 {
		t.Fatalf("%d dead letters left", got)
	}
}

// Each dead letter goes back to its own endpoint: a targeted row; for the
// WEBHOOK_URL endpoint an event row with fanout 1, unless it died before
// its fan-out: fanout NULL, fanned out again. Headers and payload travel.
func TestReplayKeepsTheEndpointAndTheFanOut(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ep := endpoint(t, db, "shop", true)
	died := time.Now().Add(-time.Hour)
	deadLetter(t, db, uuidOf(1), ep, died, false)
	deadLetter(t, db, uuidOf(2), "", died, false)
	deadLetter(t, db, uuidOf(3), "", died, true)
	r, err := s.Replay(context.Background(), outbox.ReplayFilter{IDs: []string{uuidOf(1), uuidOf(2), uuidOf(3)}})
	if err != nil || r.Count != 3 || len(r.Blocked) != 0 || len(r.Missing) != 0 {
		t.Fatalf("replay: %+v, %v", r, err)
	}
	for _, c := range []struct {
		id, where string
	}{
		{uuidOf(1), "endpoint_id = '" + ep + "' AND fanout IS NULL"},
		{uuidOf(2), "endpoint_id IS NULL AND fanout = 1"},
		{uuidOf(3), "endpoint_id IS NULL AND fanout IS NULL"},
	} {
		q := "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1 AND attempt = 1 AND NOT processed AND payload = '{\"n\": 1}' AND headers = '{\"x-h\": \"v\"}' AND " + c.where
		if got := db.Count(t, q, c.id); got != 1 {
			t.Errorf("%s: no outbox row with %s", c.id, c.where)
		}
	}
}

// Given ids, a replay is all or nothing: an id not in the table, or one of
// a disabled or removed endpoint, replays none. Without ids, those of a
// disabled or removed endpoint stay and are counted by endpoint.
func TestReplayByIDsIsAllOrNothing(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	on, off := endpoint(t, db, "on", true), endpoint(t, db, "off", false)
	gone := endpoint(t, db, "gone", true)
	died := time.Now().Add(-time.Hour)
	deadLetter(t, db, uuidOf(1), on, died, false)
	deadLetter(t, db, uuidOf(2), off, died, false)
	deadLetter(t, db, uuidOf(3), gone, died, false)
	exec(t, db, "DELETE FROM webhook_endpoints WHERE id = $1", gone)

	r, err := s.Replay(ctx, outbox.ReplayFilter{IDs: []string{uuidOf(1), uuidOf(9)}})
	if err != nil || r.Count != 0 || len(r.Missing) != 1 || r.Missing[0] != uuidOf(9) {
		t.Fatalf("an unknown id: %+v, %v", r, err)
	}
	r, err = s.Replay(ctx, outbox.ReplayFilter{IDs: []string{uuidOf(1), uuidOf(2)}})
	if err != nil || r.Count != 0 || len(r.Blocked) != 1 || r.Blocked[0] != (outbox.Blocked{EndpointID: off, Name: "off", Count: 1}) {
		t.Fatalf("an id of a disabled endpoint: %+v, %v", r, err)
	}
	if got := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); got != 3 {
		t.Fatalf("%d dead letters left, want 3: nothing replayed", got)
	}
	r, err = s.Replay(ctx, outbox.ReplayFilter{})
	want := []outbox.Blocked{{EndpointID: gone, Name: "", Count: 1}, {EndpointID: off, Name: "off", Count: 1}}
	if err != nil || r.Count != 1 || len(r.Blocked) != 2 || r.Blocked[0] != want[0] || r.Blocked[1] != want[1] {
		t.Fatalf("replay all: %+v, %v (want 1 replayed, blocked %+v)", r, err, want)
	}
	if _, err := s.Replay(ctx, outbox.ReplayFilter{Endpoint: "ghost"}); !errors.Is(err, outbox.ErrEndpointNotFound) {
		t.Fatalf("an unknown endpoint: %v", err)
	}
}

// The replay filter: event type, died since, endpoint (the WEBHOOK_URL one
// by its default name).
func TestReplayFilter(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ep := endpoint(t, db, "shop", true)
	now := time.Now()
	deadLetter(t, db, uuidOf(1), ep, now.Add(-2*time.Hour), false)
	deadLetter(t, db, uuidOf(2), ep, now.Add(-10*time.Minute), false)
	deadLetter(t, db, uuidOf(3), "", now.Add(-10*time.Minute), false)
	exec(t, db, "UPDATE webhook_dead_letter SET event_type = 'other' WHERE delivery_id = $1", uuidOf(2))
	since := now.Add(-time.Hour)
	for _, c := range []struct {
		f    outbox.ReplayFilter
		want string
	}{
		{outbox.ReplayFilter{EventType: "nothing"}, ""},
		{outbox.ReplayFilter{Endpoint: outbox.DefaultEndpointName, EventType: "other"}, ""},
		{outbox.ReplayFilter{Endpoint: "shop", Since: &since}, uuidOf(2)},
		{outbox.ReplayFilter{EventType: "e", Since: &since}, uuidOf(3)},
		{outbox.ReplayFilter{}, uuidOf(1)},
	} {
		r, err := s.Replay(context.Background(), c.f)
		wantN := int64(0)
		if c.want != "" {
			wantN = 1
		}
		if err != nil || r.Count != wantN || (c.want != "" && db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1", c.want) != 1) {
			t.Fatalf("replay %+v: %+v, %v (want %q)", c.f, r, err, c.want)
		}
	}
}

// purge --before deletes only what died before the time (one that died at
// it stays), of the endpoint given; the count says what a purge would do.
func TestPurgeKeepsTheNewer(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	ep := endpoint(t, db, "shop", true)
	cut := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	deadLetter(t, db, uuidOf(1), ep, cut.Add(-time.Microsecond), false)
	deadLetter(t, db, uuidOf(2), ep, cut, false)
	deadLetter(t, db, uuidOf(3), ep, cut.Add(time.Hour), false)
	deadLetter(t, db, uuidOf(4), "", cut.Add(-time.Hour), false)
	if n, err := s.CountDeadLettersBefore(ctx, cut, "shop"); err != nil || n != 1 {
		t.Fatalf("count shop: %d, %v", n, err)
	}
	if n, err := s.CountDeadLettersBefore(ctx, cut, ""); err != nil || n != 2 {
		t.Fatalf("count all: %d, %v", n, err)
	}
	if n, err := s.PurgeDeadLetters(ctx, cut, "shop"); err != nil || n != 1 {
		t.Fatalf("purge shop: %d, %v", n, err)
	}
	if n, err := s.PurgeDeadLetters(ctx, cut, outbox.DefaultEndpointName); err != nil || n != 1 {
		t.Fatalf("purge default: %d, %v", n, err)
	}
	if got := db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE delivery_id IN ($1, $2)", uuidOf(2), uuidOf(3)); got != 2 ||
		db.Count(t, "SELECT count(*) FROM webhook_dead_letter") != 2 {
		t.Fatalf("the dead letters that died at or after the time are not all kept")
	}
	if _, err := s.PurgeDeadLetters(ctx, cut, "ghost"); !errors.Is(err, outbox.ErrEndpointNotFound) {
		t.Fatalf("purge of an unknown endpoint: %v", err)
	}
}

// The list is newest first, at most the limit, named by endpoint
// ("default", "(removed)"), filtered by type and endpoint; none is [].
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	if list, err := s.DeadLetters(ctx, outbox.DeadLetterQuery{Limit: 10}); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("empty: %#v, %v", list, err)
	}
	ep, gone := endpoint(t, db, "shop", true), endpoint(t, db, "gone", true)
	base := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	deadLetter(t, db, uuidOf(1), ep, base, false)
	deadLetter(t, db, uuidOf(2), "", base.Add(time.Hour), false)
	deadLetter(t, db, uuidOf(3), gone, base.Add(2*time.Hour), false)
	exec(t, db, "DELETE FROM webhook_endpoints WHERE id = $1", gone)
	list, err := s.DeadLetters(ctx, outbox.DeadLetterQuery{Limit: 2})
	if err != nil || len(list) != 2 || list[0].DeliveryID != uuidOf(3) || list[0].Endpoint != "(removed)" ||
		list[1].Endpoint != outbox.DefaultEndpointName || !list[1].DiedAt.Equal(base.Add(time.Hour)) {
		t.Fatalf("list: %+v, %v", list, err)
	}
	list, err = s.DeadLetters(ctx, outbox.DeadLetterQuery{Limit: 10, Endpoint: "shop", EventType: "e"})
	if err != nil || len(list) != 1 || list[0].Endpoint != "shop" || list[0].Attempts != 3 || list[0].LastError != "http 500" {
		t.Fatalf("list shop: %+v, %v", list, err)
	}
}
