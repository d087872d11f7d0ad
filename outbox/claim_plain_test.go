package outbox

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

// claim_plain must decide what the claim's three steps decide wherever
// its path is open: the same tables, claimed by one and then, from
// scratch, by the others, give the same batch and leave the same rows
// (lease, fan-out, lane, reclaims), for the WEBHOOK_URL endpoint's pending
// deliveries (one of them a lease that expired) and events (some keyed)
// below, at and above the limits and rooms, with no endpoint in the table
// and beside one that takes none of the events: idle, or holding
// deliveries the claim may not take (due later, or the endpoint skipped).
// Where the path is closed (an endpoint that takes the events, or an
// endpoint's delivery due) it takes nothing.
func TestPlainClaimDecidesAsTheClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db, exec := plainSetup(t)
	stuck := "" // an endpoint holding deliveries: due when, or none
	fill := func(pending, events int) {
		t.Helper()
		// DELETE, not TRUNCATE: a few rows a case, 864 cases, and a
		// TRUNCATE of the partitioned outbox costs far more than them.
		exec("DELETE FROM webhook_outbox")
		exec("DELETE FROM webhook_ordering_lanes")
		exec("ALTER SEQUENCE webhook_outbox_id_seq RESTART")
		if stuck != "" {
			exec(`INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
				SELECT 'other.type', '{}', e.id, now() + ` + stuck + ` FROM webhook_endpoints e, generate_series(1, 3)`)
		}
		exec(`INSERT INTO webhook_outbox (event_type, payload, fanout, created_at)
			SELECT 'x', '{}', 1, now() - interval '1 minute' + g * interval '1 millisecond' FROM generate_series(1, $1) g`, pending)
		// A lease that expired without an outcome: taken again, a reclaim.
		exec(`UPDATE webhook_outbox SET lease_token = gen_random_uuid(), locked_until = now() - interval '1 second' WHERE id = 2`)
		for i := range events {
			key := any(nil)
			if i%4 == 1 {
				key = "k"
			}
			exec(`INSERT INTO webhook_outbox (event_type, payload, ordering_key, created_at)
				VALUES ('x', '{}', $1, now() - interval '1 second' + $2 * interval '1 millisecond')`, key, i)
		}
	}
	rowsNow := func() string {
		t.Helper()
		rows, err := db.Pool.Query(ctx, `SELECT id, fanout, lease_token IS NOT NULL, held, ordering_seq, reclaims, processed
			FROM webhook_outbox ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		var id int64
		var fanout, seq *int64
		var leased, held, processed bool
		var reclaims int
		_, err = pgx.ForEachRow(rows, []any{&id, &fanout, &leased, &held, &seq, &reclaims, &processed}, func() error {
			fmt.Fprintf(&b, "%d:%v/%v/%v/%v/%d/%v ", id, deref(fanout), leased, held, deref(seq), reclaims, processed)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	type result struct {
		taken, fresh, fanned, deliveries, rows int
		more, plain                            bool
		ids, state                             string
	}
	run := func(steps []named, q webhook.Query) result {
		t.Helper()
		rows, err := s.claimRows(ctx, nil, q, steps...)
		if err != nil {
			t.Fatal(err)
		}
		plain := plainOpen(rows)
		if len(steps) == 1 {
			// claim_plain is open when it answers at all (Store.Claim).
			plain = len(rows) > 0
		}
		b, _, err := batchOf(rows, q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range b.Rows {
			ids = append(ids, fmt.Sprint(r.ID, r.Reclaimed, r.OrderingKey, r.Sequence))
		}
		slices.Sort(ids) // UPDATE … RETURNING has no order of its own (Claim sorts)
		return result{b.Taken, b.Fresh, b.FannedOut, b.Deliveries, len(b.Rows), b.More, plain, strings.Join(ids, " "), rowsNow()}
	}
	cases := 0
	for _, beside := range []string{"no endpoint", "an idle endpoint", "an endpoint's deliveries due later", "a skipped endpoint's due deliveries"} {
		var skip []string
		switch beside {
		case "an idle endpoint":
			exec(`INSERT INTO webhook_endpoints (name, url, secret, event_types) VALUES ('idle', 'https://h.example.com/', 'whsec_x', '{other.type}')`)
		case "an endpoint's deliveries due later":
			stuck = "interval '1 hour'"
		case "a skipped endpoint's due deliveries":
			stuck = "interval '-1 hour'"
			var id string
			if err := db.Pool.QueryRow(ctx, "SELECT id::text FROM webhook_endpoints").Scan(&id); err != nil {
				t.Fatal(err)
			}
			skip = []string{id}
		}
		for _, pending := range []int{0, 3, 10} {
			for _, events := range []int{0, 1, 12} {
				for _, limit := range []int{1, 5, 15} {
					for _, room := range []int{1, 3, 10, 100} {
						q := webhook.Query{Limit: limit, Lease: time.Minute, EnvRoom: room, Env: true, Skip: skip}
						name := fmt.Sprintf("beside %s, pending %d, events %d, limit %d, room %d", beside, pending, events, limit, room)
						fill(pending, events)
						p := run([]named{claimPlain}, q)
						fill(pending, events)
						c := run(claimSteps, q)
						if p.taken > 0 {
							cases++
							// The steps open the path where they took an event.
							if !p.plain || c.plain != (p.fanned > 0) {
								t.Errorf("%s: plain column %v (plain path), %v (claim), want true and %v", name, p.plain, c.plain, p.fanned > 0)
							}
						} else if !p.plain {
							t.Errorf("%s: the plain path took nothing and did not say it was open", name)
						}
						p.plain, c.plain = false, false
						if p != c {
							t.Errorf("%s:\nplain path %+v\nclaim      %+v", name, p, c)
						}
					}
				}
			}
		}
	}
	stuck = ""
	exec("DELETE FROM webhook_endpoints")
	if cases < 240 {
		t.Fatalf("the plain path took rows in %d cases only", cases)
	}
	// Closed: it takes nothing, and the steps say so.
	q := webhook.Query{Limit: 10, Lease: time.Minute, Env: true}
	for name, closeIt := range map[string]string{
		"an endpoint that takes the events": `INSERT INTO webhook_endpoints (name, url, secret, event_types)
			VALUES ('other', 'https://h.example.com/', 'whsec_x', '{x}')`,
		"an endpoint that takes every type": `INSERT INTO webhook_endpoints (name, url, secret)
			VALUES ('all', 'https://h.example.com/', 'whsec_x')`,
		"an endpoint's delivery due": `WITH e AS (INSERT INTO webhook_endpoints (name, url, secret, event_types)
			VALUES ('due', 'https://h.example.com/', 'whsec_x', '{other.type}') RETURNING id)
			INSERT INTO webhook_outbox (event_type, payload, endpoint_id) SELECT 'other.type', '{}', id FROM e`,
		"a disabled endpoint's pending delivery": `WITH e AS (INSERT INTO webhook_endpoints (name, url, secret, enabled)
			VALUES ('off', 'https://h.example.com/', 'whsec_x', false) RETURNING id)
			INSERT INTO webhook_outbox (event_type, payload, endpoint_id) SELECT 'x', '{}', id FROM e`,
	} {
		fill(3, 3)
		exec(closeIt)
		before := rowsNow()
		if p := run([]named{claimPlain}, q); p.taken != 0 || p.rows != 0 || p.plain || p.state != before {
			t.Errorf("%s: the plain path took %+v (or said it was open)", name, p)
		}
		if c := run(claimSteps, q); c.taken == 0 || c.plain {
			t.Errorf("%s: the claim took %d rows, plain %v; want rows and not plain", name, c.taken, c.plain)
		}
		exec("DELETE FROM webhook_outbox WHERE endpoint_id IS NOT NULL")
		exec("DELETE FROM webhook_endpoints")
	}
}

func deref(p *int64) any {
	if p == nil {
		return "-"
	}
	return *p
}

// The store stays on the plain path while it is open, also through claims
// that find nothing due (claim_plain's status row): an empty claim, a
// sparse stream's recheck, is one statement, not the plain one and then
// the three steps. Here the steps cannot run (a column of
// webhook_endpoints that they return, and the plain statement does not
// read, is renamed), so a claim that fell through to them would fail. Once
// the path closes (an endpoint that takes the events), the claim runs the
// steps and the path stays closed.
func TestStoreStaysOnThePlainPathWhenNothingIsDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, exec := plainSetup(t)
	insert := func(n int) {
		t.Helper()
		exec(`INSERT INTO webhook_outbox (event_type, payload) SELECT 'x', '{}' FROM generate_series(1, $1)`, n)
	}
	q := webhook.Query{Limit: 10, Lease: time.Minute, Env: true}
	claim := func(step string, want int, open bool) {
		t.Helper()
		b, err := s.Claim(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if b.Taken != want || len(b.Rows)-b.Fresh != want || s.plain.Load() != open {
			t.Fatalf("%s: taken %d, rows %d (%d fresh), plain path open %v; want %d, %d, %v", step, b.Taken, len(b.Rows), b.Fresh,
				s.plain.Load(), want, want, open)
		}
	}
	insert(1)
	claim("the first claim (the steps)", 1, true)
	exec("ALTER TABLE webhook_endpoints RENAME COLUMN secret_previous_until TO secret_previous_until_away")
	for i := range 3 {
		claim(fmt.Sprintf("empty claim %d on the plain path", i+1), 0, true)
	}
	insert(3)
	claim("three events on the plain path", 3, true)
	claim("empty again", 0, true)
	// A producer may write the id itself, 0 too: the status row is not
	// told by its id.
	exec(`INSERT INTO webhook_outbox (id, event_type, payload) VALUES (0, 'x', '{}')`)
	claim("an event of id 0", 1, true)
	exec("ALTER TABLE webhook_endpoints RENAME COLUMN secret_previous_until_away TO secret_previous_until")
	exec(`INSERT INTO webhook_endpoints (name, url, secret, event_types) VALUES ('idle', 'https://h.example.com/', 'whsec_x', '{other.type}')`)
	insert(1)
	claim("open beside an endpoint that takes none of the events", 1, true)
	exec(`INSERT INTO webhook_endpoints (name, url, secret, event_types) VALUES ('other', 'https://h.example.com/', 'whsec_x', '{x}')`)
	insert(1)
	claim("closed: the plain statement takes nothing, the steps the event", 1, false)
	insert(1)
	claim("closed stays closed", 1, false)
}

// plainSetup gives a Store over a fresh database, the database, and exec,
// which runs a statement there or fails the test.
func plainSetup(t *testing.T) (*Store, *testdb.DB, func(sql string, args ...any)) {
	t.Helper()
	db := testdb.New(t)
	s, err := New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	return s, db, exec
}
