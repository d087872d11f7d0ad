package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// badTimes are the created_at values the worker cannot handle.
var badTimes = []string{"-infinity", "infinity", "294276-12-31", "0044-03-15 BC", "1969-12-31 23:59:59+00"}

func TestClaimDeadLettersRowsItCannotDecode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db := claimSetup(t, 10, time.Minute)
	db.DropTimeRanges(t)
	// 30 ordinary events, with the bad ones among them (the infinite past
	// first in the claim's order, the others due or not).
	db.Insert(t, "ok", make30()...)
	for _, ts := range badTimes {
		if _, err := db.Pool.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('bad', '{}', $1::timestamptz)", ts); err != nil {
			t.Fatal(err)
		}
	}
	db.Insert(t, "ok", make30()[:0]...)
	delivered := 0
	for i := 0; i < 20; i++ {
		b, err := c.Claim(ctx, c.query(webhook.Query{}))
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if b.BrokenErr != nil {
			t.Fatalf("claim %d: dead-lettering the broken rows: %v", i, b.BrokenErr)
		}
		for _, r := range b.Rows {
			if r.EventType != "ok" {
				t.Fatalf("a bad row was returned to be delivered: %+v", r)
			}
			write(t, c, outcome(r, webhook.Done))
			delivered++
		}
		if b.Taken == 0 {
			break
		}
	}
	if delivered != 30 {
		t.Fatalf("delivered %d of the 30 ordinary rows", delivered)
	}
	// Due bad rows: -infinity, the BC date and 1969 (infinity and 294276 are
	// never due, so never claimed).
	dead := db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE event_type = 'bad' AND last_error LIKE 'the worker cannot handle this row: created_at %'")
	if dead != 3 {
		t.Fatalf("%d bad rows in the dead letter, want 3", dead)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type = 'bad' AND NOT processed AND created_at <= now()"); n != 0 {
		t.Fatalf("%d due bad rows still pending", n)
	}
	var reason string
	if err := db.Pool.QueryRow(ctx, "SELECT last_error FROM webhook_dead_letter ORDER BY id LIMIT 1").Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "-infinity") {
		t.Fatalf("reason %q does not say what was wrong", reason)
	}
	// NextDue is sane with a row due in the year 294276.
	if d, ok, err := c.NextDue(ctx); err != nil || !ok || d <= 0 || d > 48*time.Hour {
		t.Fatalf("NextDue = %s, %v, %v; want a bounded positive wait", d, ok, err)
	}
}

func make30() []string {
	out := make([]string, 30)
	for i := range out {
		out[i] = `{"n": 1}`
	}
	return out
}
