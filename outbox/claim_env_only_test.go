package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

// An endpoint of the table that takes none of the events changes nothing
// for the WEBHOOK_URL endpoint's deliveries: the same table, claimed once
// with no endpoint in the table and once beside an enabled endpoint
// subscribed to another type, gives the same batch and leaves the same
// rows, for rooms and limits below, at and above the events and pending
// deliveries there are.
func TestClaimWithOnlyTheURLEndpointDecidesAsTheFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type state struct {
		rows, taken, fanned int
		more                bool
		unfanned, leased    int
		waiting             int // fanned out, not leased
	}
	run := func(db *testdb.DB, pending, events, limit, envRoom int) state {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, "DELETE FROM webhook_outbox"); err != nil { // cheaper than TRUNCATE of the partitions, case after case
			t.Fatal(err)
		}
		// Pending deliveries of the WEBHOOK_URL endpoint (fanned out
		// earlier, not leased), older than the events.
		if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, fanout, created_at)
			SELECT 'x', '{}', 1, now() - interval '1 minute' FROM generate_series(1, $1)`, pending); err != nil {
			t.Fatal(err)
		}
		for range events {
			db.Insert(t, "x", `{}`)
		}
		c := newClaimant(t, db, 100, 30*time.Second, true)
		b := claimQ(t, c, webhook.Query{Limit: limit, EnvRoom: envRoom})
		return state{rows: len(b.Rows), taken: b.Taken, fanned: b.FannedOut, more: b.More,
			unfanned: db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND fanout IS NULL"),
			leased:   db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND lease_token IS NOT NULL"),
			waiting:  db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND fanout IS NOT NULL AND lease_token IS NULL")}
	}
	plain, general := testdb.New(t), testdb.New(t)
	newEndpoint(t, general, "other", "another.type")
	for _, pending := range []int{0, 3, 10} {
		for _, events := range []int{0, 1, 12} {
			for _, limit := range []int{1, 5, 15} {
				for _, envRoom := range []int{1, 3, 10, 100} {
					name := fmt.Sprintf("pending %d, events %d, limit %d, room %d", pending, events, limit, envRoom)
					p, g := run(plain, pending, events, limit, envRoom), run(general, pending, events, limit, envRoom)
					if p != g {
						t.Errorf("%s: with only the URL endpoint %+v, through the fan-out %+v", name, p, g)
					}
					if events+pending > 0 && p.rows == 0 {
						t.Errorf("%s: nothing leased: %+v", name, p)
					}
				}
			}
		}
	}
}

// While the WEBHOOK_URL endpoint is at its limit (SkipEnv), a claim does
// not touch events only it takes: beside an endpoint subscribed to another
// type they stay as they are (not made its pending deliveries, which would
// write each twice), and an event an endpoint of the table takes is still
// fanned out, with the WEBHOOK_URL endpoint's delivery left pending.
func TestClaimLeavesURLOnlyEventsWhileTheURLEndpointIsSkipped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	c := newClaimant(t, db, 10, time.Minute, true)
	newEndpoint(t, db, "idle", "another.type")
	for range 5 {
		db.Insert(t, "x", `{}`)
	}
	b, err := c.Claim(ctx, c.query(webhook.Query{SkipEnv: true}))
	if err != nil {
		t.Fatal(err)
	}
	if b.Taken != 0 || len(b.Rows) != 0 || b.FannedOut != 0 {
		t.Fatalf("claim with the URL endpoint skipped: %+v, want nothing taken", b)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE fanout IS NULL AND lease_token IS NULL AND NOT processed"); n != 5 {
		t.Fatalf("events left as they were: %d of 5", n)
	}
	newEndpoint(t, db, "takes", "x")
	if b, err = c.Claim(ctx, c.query(webhook.Query{SkipEnv: true})); err != nil {
		t.Fatal(err)
	}
	if b.FannedOut == 0 || b.Fresh == 0 {
		t.Fatalf("claim with an endpoint that takes the events: %+v, want them fanned out", b)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND endpoint_id IS NULL AND fanout = 2 AND lease_token IS NULL"); n != b.FannedOut {
		t.Fatalf("events fanned out with the URL endpoint's delivery pending: %d, want %d", n, b.FannedOut)
	}
}
