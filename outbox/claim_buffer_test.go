package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// The claims reuse one buffer for their rows: a Batch a claim returned
// holds nothing of it, so the claims after it (of the plain path, of the
// steps, of fan-outs) leave its deliveries as they were.
func TestClaimsLeaveEarlierBatchesAlone(t *testing.T) {
	t.Parallel()
	c, db := claimSetup(t, 10, time.Minute)
	ctx := context.Background()
	insertEvents := func(from, n int) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload)
			SELECT 'order.paid', jsonb_build_object('n', g, 'pad', repeat('x', 200)) FROM generate_series($1::int, $2::int) g`,
			from, from+n-1); err != nil {
			t.Fatal(err)
		}
	}
	type seen struct {
		id                int64
		deliveryID, url   string
		payload, endpoint string
	}
	snapshot := func(b webhook.Batch) []seen {
		out := make([]seen, len(b.Rows))
		for i, d := range b.Rows {
			out[i] = seen{d.ID, d.DeliveryID, d.URL, string(d.Payload), d.EndpointID}
		}
		return out
	}
	var batches []webhook.Batch
	var snaps [][]seen
	take := func(c claimant) {
		t.Helper()
		b := claimQ(t, c, webhook.Query{})
		if len(b.Rows) == 0 {
			t.Fatal("a claim took nothing")
		}
		batches, snaps = append(batches, b), append(snaps, snapshot(b))
	}
	// The plain path first: the WEBHOOK_URL endpoint alone.
	insertEvents(1, 30)
	take(c)
	take(c)
	// Then table endpoints, the same Store claiming without a WEBHOOK_URL
	// endpoint: the events fan out in flight, their deliveries without
	// rows, their payloads read once on the events' rows.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret)
		VALUES ('a', 'http://127.0.0.1:9/a', 'whsec_x'), ('b', 'http://127.0.0.1:9/b', 'whsec_y')`); err != nil {
		t.Fatal(err)
	}
	insertEvents(31, 30)
	fan := claimant{Store: c.Store, batch: c.batch, lease: c.lease}
	for range 4 {
		take(fan)
	}
	ids := map[string]bool{}
	for i, b := range batches {
		if got := snapshot(b); !slices.Equal(got, snaps[i]) {
			t.Fatalf("batch %d changed after the claims that followed it:\nwas %v\nnow %v", i, snaps[i], got)
		}
		for _, d := range b.Rows {
			key := fmt.Sprintf("%d/%s", d.ID, d.DeliveryID)
			if ids[key] {
				t.Fatalf("delivery %s claimed twice", key)
			}
			ids[key] = true
		}
	}
	if fanned := batches[len(batches)-1].Rows; !slices.ContainsFunc(fanned, func(d webhook.Delivery) bool { return d.Event != 0 }) {
		t.Fatal("the last claim fanned out no event: the test claims no fan-out in flight")
	}
}
