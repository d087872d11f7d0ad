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
		if _, err := db.Pool.Exec(ctx, "TRUNCATE webhook_outbox"); err != nil {
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
