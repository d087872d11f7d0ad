package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// A deferral moves the row itself: same id, same attempt, due later, lease
// ended, no attempt recorded, no row made; a stale token moves nothing.
func TestDeferMovesTheSameRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db := claimSetup(t, 10, time.Minute)
	db.Insert(t, "e", `{"k":"a"}`, `{"k":"b"}`)
	rows := claim(t, c, 0)
	if len(rows) != 2 {
		t.Fatalf("claimed %d", len(rows))
	}
	// Deferred (with an attempt number and health that must be ignored), and
	// in the same statement a retry, as the completer batches them.
	written := write(t, c,
		webhook.Outcome{ID: rows[0].ID, Token: rows[0].Token, Kind: webhook.Defer, Attempt: 7, Delay: time.Hour},
		webhook.Outcome{ID: rows[1].ID, Token: rows[1].Token, Kind: webhook.Retry, Attempt: 2, Delay: time.Hour,
			Health: webhook.Failing, AttemptClass: "retryable", AttemptError: "http 503", Status: 503, Started: time.Now()})
	if !written[0] || !written[1] {
		t.Fatalf("written %v", written)
	}
	var id int64
	var attempt int
	var dueIn float64
	var processed, leased bool
	err := db.Pool.QueryRow(ctx, `SELECT id, attempt, EXTRACT(EPOCH FROM created_at - now()), processed,
		locked_until IS NOT NULL OR lease_token IS NOT NULL FROM webhook_outbox WHERE payload->>'k' = 'a'`).
		Scan(&id, &attempt, &dueIn, &processed, &leased)
	if err != nil {
		t.Fatal(err)
	}
	if id != rows[0].ID || attempt != 1 || processed || leased || dueIn < 3500 || dueIn > 3600 {
		t.Fatalf("deferred row: id %d (was %d) attempt %d processed %v leased %v due in %vs", id, rows[0].ID, attempt, processed, leased, dueIn)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 3 {
		t.Fatalf("%d rows, want 3: the two events and one retry", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_attempts"); n != 1 {
		t.Fatalf("%d attempts recorded, want only the retried one's", n)
	}
	if d, ok, err := c.NextDue(ctx); err != nil || !ok || d < 59*time.Minute {
		t.Fatalf("NextDue = %v %v %v", d, ok, err)
	}
	// The fence: the same token again (the lease it names has ended) moves
	// nothing, and neither does a stale token after another claim.
	if w := write(t, c, webhook.Outcome{ID: rows[0].ID, Token: rows[0].Token, Kind: webhook.Defer, Delay: 0}); w[0] {
		t.Fatal("a second deferral under an ended lease was written")
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE webhook_outbox SET created_at = now() - interval '1 second' WHERE id = $1`, rows[0].ID); err != nil {
		t.Fatal(err)
	}
	again := claim(t, c, 0)
	if len(again) != 1 || again[0].ID != rows[0].ID || again[0].Reclaimed || again[0].Attempt != 1 {
		t.Fatalf("claim after the deferral: %+v", again)
	}
	if w := write(t, c, webhook.Outcome{ID: rows[0].ID, Token: rows[0].Token, Kind: webhook.Defer, Delay: time.Hour}); w[0] {
		t.Fatal("a stale token deferred the row")
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE payload->>'k' = 'a' AND created_at <= now() AND lease_token IS NOT NULL"); n != 1 {
		t.Fatal("the stale deferral moved the row or ended the live lease")
	}
	// Delays out of range neither fail the batch nor travel: negative is
	// due at once, astronomically large is cut to maxDelay (366 days).
	written = write(t, c, webhook.Outcome{ID: again[0].ID, Token: again[0].Token, Kind: webhook.Defer, Delay: time.Duration(1 << 62)})
	if !written[0] {
		t.Fatal("a huge deferral was not written")
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE payload->>'k' = 'a' AND created_at > now() + interval '365 days' AND created_at < now() + interval '367 days'"); n != 1 {
		t.Fatal("a huge deferral was not cut to maxDelay (366 days)")
	}
}
