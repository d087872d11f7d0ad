package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// claimant is a Store and what the dispatcher puts in each of its claims
// (dispatcher.Config): its batch size, the Limit of a query that has
// none; its lease; whether it has a WEBHOOK_URL endpoint.
type claimant struct {
	*outbox.Store
	batch int
	lease time.Duration
	env   bool
}

func newClaimant(t testing.TB, db *testdb.DB, batch int, lease time.Duration, env bool) claimant {
	t.Helper()
	s, err := outbox.New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return claimant{Store: s, batch: batch, lease: lease, env: env}
}

// query is q as the dispatcher asks it: Limit (the batch size if q has
// none), Lease and Env filled in.
func (c claimant) query(q webhook.Query) webhook.Query {
	if q.Limit <= 0 {
		q.Limit = c.batch
	}
	q.Lease, q.Env = c.lease, c.env
	return q
}

// claimSetup returns a claimant of batch and lease with a WEBHOOK_URL
// endpoint, over a fresh migrated database.
func claimSetup(t *testing.T, batch int, lease time.Duration) (claimant, *testdb.DB) {
	t.Helper()
	db := testdb.New(t)
	return newClaimant(t, db, batch, lease, true), db
}

func TestNewNeedsAPool(t *testing.T) {
	t.Parallel()
	if _, err := outbox.New(nil); err == nil || !strings.Contains(err.Error(), "pool") {
		t.Fatalf("want error naming the pool, got %v", err)
	}
}

// claim claims up to limit rows (0: the batch size).
func claim(t *testing.T, c claimant, limit int) []webhook.Delivery {
	t.Helper()
	return claimQ(t, c, webhook.Query{Limit: limit}).Rows
}

// claimQ claims c.query(q).
func claimQ(t *testing.T, c claimant, q webhook.Query) webhook.Batch {
	t.Helper()
	b, err := c.Claim(context.Background(), c.query(q))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// write records outcomes and returns which were written.
func write(t *testing.T, c claimant, outcomes ...webhook.Outcome) []bool {
	t.Helper()
	written, err := c.Record(context.Background(), outcomes)
	if err != nil {
		t.Fatal(err)
	}
	return written
}

// outcome is r's outcome of kind k, fenced as the completer fences it (a
// fanned-out delivery without a row of its own by its event's lease).
func outcome(r webhook.Delivery, k webhook.Kind) webhook.Outcome {
	return webhook.Outcome{ID: r.ID, Token: r.Token, Kind: k, Event: r.Event, EndpointID: r.EndpointID}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("oldest first, at most BatchSize, leased, committed at once", func(t *testing.T) {
		t.Parallel()
		c, db := claimSetup(t, 3, time.Minute)
		ids := db.Insert(t, "stream.updated", `{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`)
		rows := claim(t, c, 0)
		if len(rows) != 3 || rows[0].ID != ids[0] || rows[1].ID != ids[1] || rows[2].ID != ids[2] {
			t.Fatalf("claimed %+v", rows)
		}
		r := rows[0]
		if r.EventType != "stream.updated" || string(r.Payload) != `{"n": 1}` || r.Attempt != 1 || len(r.DeliveryID) != 36 || r.Reclaimed {
			t.Fatalf("row %+v payload %q", r, r.Payload)
		}
		if rows[0].Token == rows[1].Token || rows[0].Token == ([16]byte{}) {
			t.Fatal("each row gets a token of its own")
		}
		// The lease is visible to everyone: no transaction is left open.
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE locked_until > now() + interval '50 seconds' AND lease_token IS NOT NULL"); n != 3 {
			t.Fatalf("leased rows = %d", n)
		}
		if n := db.Count(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'"); n != 0 {
			t.Fatalf("%d sessions idle in transaction after a claim", n)
		}
		rest := claim(t, c, 0)
		if len(rest) != 1 || rest[0].ID != ids[3] {
			t.Fatalf("held rows claimed again: %+v", rest)
		}
		if rows := claim(t, c, 0); len(rows) != 0 {
			t.Fatalf("nothing due: got %+v", rows)
		}
	})

	t.Run("an expired lease is claimed again and counted", func(t *testing.T) {
		t.Parallel()
		c, db := claimSetup(t, 5, 50*time.Millisecond)
		db.Insert(t, "e", `{}`)
		first := claim(t, c, 0)
		if len(first) != 1 {
			t.Fatalf("claimed %d", len(first))
		}
		var again []webhook.Delivery
		deadline := time.Now().Add(10 * time.Second)
		for len(again) == 0 && time.Now().Before(deadline) {
			again = claim(t, c, 0)
		}
		if len(again) != 1 || !again[0].Reclaimed || again[0].Token == first[0].Token {
			t.Fatalf("reclaim: %+v", again)
		}
		if n := db.Count(t, "SELECT reclaims FROM webhook_outbox"); n != 1 {
			t.Fatalf("reclaims = %d", n)
		}
		// The fence: the first holder's outcome is refused, the second's
		// written.
		if w := write(t, c, outcome(first[0], webhook.Done)); w[0] {
			t.Fatal("outcome of an expired lease written")
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed"); n != 0 {
			t.Fatal("the fenced outcome marked the row")
		}
		if w := write(t, c, outcome(again[0], webhook.Done)); !w[0] {
			t.Fatal("outcome of the live lease refused")
		}
	})

	t.Run("concurrent claims are disjoint", func(t *testing.T) {
		t.Parallel()
		c, db := claimSetup(t, 5, time.Minute)
		db.Insert(t, "e", `{}`, `{}`, `{}`, `{}`, `{}`, `{}`, `{}`)
		type res struct {
			rows []webhook.Delivery
			err  error
		}
		out := make(chan res, 4)
		for range 4 {
			go func() { b, err := c.Claim(ctx, c.query(webhook.Query{})); out <- res{b.Rows, err} }()
		}
		seen := map[int64]bool{}
		for range 4 {
			r := <-out
			if r.err != nil {
				t.Fatal(r.err)
			}
			for _, row := range r.rows {
				if seen[row.ID] {
					t.Fatalf("row %d claimed twice", row.ID)
				}
				seen[row.ID] = true
			}
		}
		// An event a claim locked to learn that more are left is skipped
		// by the others meanwhile, and taken by the next claim: claims go
		// on until none finds a row, still never one row twice.
		for range 7 {
			b, err := c.Claim(ctx, c.query(webhook.Query{}))
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Rows) == 0 {
				break
			}
			for _, row := range b.Rows {
				if seen[row.ID] {
					t.Fatalf("row %d claimed twice", row.ID)
				}
				seen[row.ID] = true
			}
		}
		if len(seen) != 7 {
			t.Fatalf("claimed %d of 7", len(seen))
		}
	})

	t.Run("future rows wait and NextDue reports them", func(t *testing.T) {
		t.Parallel()
		c, db := claimSetup(t, 5, time.Minute)
		if _, ok, err := c.NextDue(ctx); ok || err != nil {
			t.Fatalf("empty table: ok=%v err=%v", ok, err)
		}
		_, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('e', '{}', now() + interval '1 hour')`)
		if err != nil {
			t.Fatal(err)
		}
		if rows := claim(t, c, 0); len(rows) != 0 {
			t.Fatalf("future row claimed: %+v", rows)
		}
		d, ok, err := c.NextDue(ctx)
		if err != nil || !ok || d < 59*time.Minute || d > time.Hour {
			t.Fatalf("NextDue = %v %v %v", d, ok, err)
		}
	})
}

func TestRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db := claimSetup(t, 10, time.Minute)
	db.Insert(t, "e", `{"k":"done"}`, `{"k":"retry"}`, `{"k":"defer"}`, `{"k":"dead"}`, `{"k":"dead0"}`, `{"k":"release"}`)
	rows := claim(t, c, 0)
	if len(rows) != 6 {
		t.Fatalf("claimed %d", len(rows))
	}
	written := write(t, c,
		outcome(rows[0], webhook.Done),
		webhook.Outcome{ID: rows[1].ID, Token: rows[1].Token, Kind: webhook.Retry, Attempt: 2, Delay: time.Hour},
		webhook.Outcome{ID: rows[2].ID, Token: rows[2].Token, Kind: webhook.Defer, Attempt: 1, Delay: 2 * time.Hour},
		webhook.Outcome{ID: rows[3].ID, Token: rows[3].Token, Kind: webhook.Dead, Attempt: 1, Status: 410, Error: "http 410"},
		webhook.Outcome{ID: rows[4].ID, Token: rows[4].Token, Kind: webhook.Dead, Attempt: 3, Error: "timeout after 10s"},
		outcome(rows[5], webhook.Release),
	)
	for i, w := range written {
		if !w {
			t.Fatalf("outcome %d not written", i)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed AND processed_at IS NOT NULL"); n != 4 {
		t.Fatalf("processed = %d, want 4 (the deferred row stays pending)", n)
	}
	var retryDelivery, origDelivery string
	var attempt int
	var dueIn float64
	err := db.Pool.QueryRow(ctx, `SELECT n.delivery_id::text, o.delivery_id::text, n.attempt, EXTRACT(EPOCH FROM n.created_at - now())
		FROM webhook_outbox n JOIN webhook_outbox o ON o.payload = n.payload AND o.processed
		WHERE NOT n.processed AND n.payload->>'k' = 'retry'`).Scan(&retryDelivery, &origDelivery, &attempt, &dueIn)
	if err != nil {
		t.Fatal(err)
	}
	if retryDelivery != origDelivery || attempt != 2 || dueIn < 3500 || dueIn > 3600 {
		t.Fatalf("retry row: id %s vs %s attempt %d due in %vs", retryDelivery, origDelivery, attempt, dueIn)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE payload->>'k' = 'defer'"); n != 1 {
		t.Fatalf("deferred rows = %d, want the one row, moved", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE (payload->>'k' = 'dead' AND last_status = 410 AND attempts = 1 AND last_error = 'http 410')
		OR (payload->>'k' = 'dead0' AND last_status IS NULL AND attempts = 3)`); n != 2 {
		t.Fatalf("dead letters = %d", n)
	}
	// The released row is due and free at once, and not counted a reclaim.
	again := claim(t, c, 0)
	if len(again) != 1 || again[0].ID != rows[5].ID || again[0].Reclaimed {
		t.Fatalf("released row: %+v", again)
	}
	// A second write of the same outcomes is refused by the fence: nothing
	// is marked, retried or dead-lettered twice.
	if w := write(t, c, outcome(rows[0], webhook.Done), webhook.Outcome{ID: rows[1].ID, Token: rows[1].Token, Kind: webhook.Retry, Attempt: 2}); w[0] || w[1] {
		t.Fatalf("second write accepted: %v", w)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE payload->>'k' = 'retry'"); n != 2 {
		t.Fatalf("retry rows = %d, want the original and one retry", n)
	}
}

func TestRecordFailureKeepsRowsPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db := claimSetup(t, 10, time.Minute)
	db.Insert(t, "e", `{}`)
	rows := claim(t, c, 0)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Record(cctx, []webhook.Outcome{outcome(rows[0], webhook.Done)}); err == nil {
		t.Fatal("record with a cancelled context succeeded")
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed"); n != 1 {
		t.Fatalf("pending = %d, want 1", n)
	}
}

// An error text is whatever the endpoint or the network gave: bytes that
// are not UTF-8, and NUL characters, which no PostgreSQL text can hold.
// The write keeps what it can of them and refuses nothing, so that no
// outcome of the batch is lost to one bad byte.
func TestRecordKeepsErrorsThatAreNotText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db := claimSetup(t, 10, time.Minute)
	db.Insert(t, "e", `{"k":"dead"}`, `{"k":"done"}`)
	rows := claim(t, c, 0)
	if len(rows) != 2 {
		t.Fatalf("claimed %d", len(rows))
	}
	written := write(t, c,
		webhook.Outcome{ID: rows[0].ID, Token: rows[0].Token, Kind: webhook.Dead, Attempt: 1, Status: 500, Error: "http 500: \xff\xfe\x00bad",
			Health: webhook.Failing, AttemptClass: "permanent", AttemptError: "read \x00\xc3(", Started: time.Now()},
		webhook.Outcome{ID: rows[1].ID, Token: rows[1].Token, Kind: webhook.Done, Health: webhook.Healthy, Started: time.Now()},
	)
	if !written[0] || !written[1] {
		t.Fatalf("written %v, want both", written)
	}
	var lastError, tryError string
	if err := db.Pool.QueryRow(ctx, `SELECT d.last_error, a.error FROM webhook_dead_letter d JOIN webhook_attempts a USING (delivery_id)`).Scan(&lastError, &tryError); err != nil {
		t.Fatal(err)
	}
	if lastError != "http 500: \uFFFDbad" || tryError != "read \uFFFD(" {
		t.Fatalf("dead letter's error %q, attempt's %q", lastError, tryError)
	}
}
