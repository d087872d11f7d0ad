package claimer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/internal/testdb"
)

func setup(t *testing.T, batch int) (*claimer.Claimer, *testdb.DB) {
	t.Helper()
	db := testdb.New(t)
	c, err := claimer.New(claimer.Config{Pool: db.Pool, BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	return c, db
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := claimer.New(claimer.Config{}); err == nil || !strings.Contains(err.Error(), "Pool") {
		t.Fatalf("want error naming Pool, got %v", err)
	}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("oldest first, at most BatchSize, empty gives nil", func(t *testing.T) {
		t.Parallel()
		c, db := setup(t, 3)
		ids := db.Insert(t, "stream.updated", `{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`)
		b, err := c.Claim(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Rows) != 3 || b.Rows[0].ID != ids[0] || b.Rows[2].ID != ids[2] {
			t.Fatalf("claimed %+v", b.Rows)
		}
		r := b.Rows[0]
		if r.EventType != "stream.updated" || string(r.Payload) != `{"n": 1}` || r.Attempt != 1 || len(r.DeliveryID) != 36 {
			t.Fatalf("row %+v payload %q", r, r.Payload)
		}
		b.Abort()
		b2, err := c.Claim(ctx, 1)
		if err != nil || len(b2.Rows) != 1 || b2.Rows[0].ID != ids[0] {
			t.Fatalf("after abort the rows are claimable again: %v %+v", err, b2)
		}
		done(t, b2)
		b3, err := c.Claim(ctx, 0)
		if err != nil || b3 == nil || len(b3.Rows) != 3 {
			t.Fatalf("claim the remaining three: %+v %v", b3, err)
		}
		done(t, b3)
		if b, err := c.Claim(ctx, 0); b != nil || err != nil {
			t.Fatalf("nothing due: got %+v %v", b, err)
		}
	})

	t.Run("concurrent claims are disjoint", func(t *testing.T) {
		t.Parallel()
		c, db := setup(t, 5)
		db.Insert(t, "e", `{}`, `{}`, `{}`, `{}`, `{}`, `{}`, `{}`)
		a, err := c.Claim(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Claim(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Rows) != 5 || len(b.Rows) != 2 {
			t.Fatalf("got %d and %d rows", len(a.Rows), len(b.Rows))
		}
		seen := map[int64]bool{}
		for _, r := range append(a.Rows, b.Rows...) {
			if seen[r.ID] {
				t.Fatalf("row %d claimed twice", r.ID)
			}
			seen[r.ID] = true
		}
		a.Abort()
		b.Abort()
	})

	t.Run("future rows wait and NextDue reports them", func(t *testing.T) {
		t.Parallel()
		c, db := setup(t, 5)
		if _, ok, err := c.NextDue(ctx); ok || err != nil {
			t.Fatalf("empty table: ok=%v err=%v", ok, err)
		}
		_, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('e', '{}', now() + interval '1 hour')`)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := c.Claim(ctx, 0); b != nil || err != nil {
			t.Fatalf("future row claimed: %+v %v", b, err)
		}
		d, ok, err := c.NextDue(ctx)
		if err != nil || !ok || d < 59*time.Minute || d > time.Hour {
			t.Fatalf("NextDue = %v %v %v", d, ok, err)
		}
	})
}

func done(t *testing.T, b *claimer.Batch) {
	t.Helper()
	out := make([]claimer.Outcome, len(b.Rows))
	for i := range out {
		out[i] = claimer.Outcome{Kind: claimer.Done}
	}
	if err := b.Complete(context.Background(), out); err != nil {
		t.Fatal(err)
	}
}

func TestComplete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db := setup(t, 10)
	db.Insert(t, "e", `{"k":"done"}`, `{"k":"retry"}`, `{"k":"defer"}`, `{"k":"dead"}`, `{"k":"dead0"}`)
	b, err := c.Claim(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rows) != 5 {
		t.Fatalf("claimed %d", len(b.Rows))
	}
	err = b.Complete(ctx, []claimer.Outcome{
		{Kind: claimer.Done},
		{Kind: claimer.Retry, Attempt: 2, Delay: time.Hour},
		{Kind: claimer.Defer, Attempt: 1, Delay: 2 * time.Hour},
		{Kind: claimer.Dead, Attempt: 1, Status: 410, Error: "http 410"},
		{Kind: claimer.Dead, Attempt: 3, Error: "timeout after 10s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed AND processed_at IS NOT NULL"); n != 5 {
		t.Fatalf("processed = %d, want 5", n)
	}
	var retryDelivery, origDelivery string
	var attempt int
	var dueIn float64
	err = db.Pool.QueryRow(ctx, `SELECT n.delivery_id::text, o.delivery_id::text, n.attempt, EXTRACT(EPOCH FROM n.created_at - now())
		FROM webhook_outbox n JOIN webhook_outbox o ON o.payload = n.payload AND o.processed
		WHERE NOT n.processed AND n.payload->>'k' = 'retry'`).Scan(&retryDelivery, &origDelivery, &attempt, &dueIn)
	if err != nil {
		t.Fatal(err)
	}
	if retryDelivery != origDelivery || attempt != 2 || dueIn < 3500 || dueIn > 3600 {
		t.Fatalf("retry row: id %s vs %s attempt %d due in %vs", retryDelivery, origDelivery, attempt, dueIn)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND payload->>'k' = 'defer' AND attempt = 1"); n != 1 {
		t.Fatalf("deferred rows = %d", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE (payload->>'k' = 'dead' AND last_status = 410 AND attempts = 1 AND last_error = 'http 410')
		OR (payload->>'k' = 'dead0' AND last_status IS NULL AND attempts = 3)`); n != 2 {
		t.Fatalf("dead letters = %d", n)
	}
	if err := (&claimer.Batch{}).Complete(ctx, []claimer.Outcome{{}}); err == nil {
		t.Fatal("mismatched outcomes accepted")
	}
}

func TestCompleteFailureKeepsRowsPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db := setup(t, 10)
	db.Insert(t, "e", `{}`)
	b, err := c.Claim(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Complete(cctx, []claimer.Outcome{{Kind: claimer.Done}}); err == nil {
		t.Fatal("complete with a cancelled context succeeded")
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"); n != 1 {
		t.Fatalf("pending = %d, want 1", n)
	}
}
