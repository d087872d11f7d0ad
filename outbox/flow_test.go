package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// limit sets endpoint id's flow control (a NULL for a zero).
func limit(t *testing.T, db *testdb.DB, id string, rate, perS, burst, inFlight int) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), `UPDATE webhook_endpoints
		SET rate_limit = nullif($2::int, 0), rate_period_s = CASE WHEN $2::int > 0 THEN $3::int END, rate_burst = $4,
		  max_in_flight = nullif($5, 0)
		WHERE id = $1`, id, rate, perS, burst, inFlight); err != nil {
		t.Fatal(err)
	}
}

// events inserts n events of type "t".
func events(t *testing.T, db *testdb.DB, n int) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload)
		SELECT 't', '{}' FROM generate_series(1, $1)`, n); err != nil {
		t.Fatal(err)
	}
}

// claimDry claims with c until a claim takes nothing, and returns the
// deliveries it was given, by endpoint, and the last claim's FlowWait.
func claimDry(t *testing.T, c claimant, q webhook.Query) (map[string][]webhook.Delivery, time.Duration) {
	t.Helper()
	got := map[string][]webhook.Delivery{}
	for range 100 {
		b := claimQ(t, c, q)
		for _, r := range b.Rows {
			got[r.EndpointID] = append(got[r.EndpointID], r)
		}
		if b.Taken == 0 && len(b.Rows) == 0 {
			return got, b.FlowWait
		}
	}
	t.Fatal("claims never ran dry")
	return nil, 0
}

func TestFlowControl(t *testing.T) {
	t.Parallel()

	t.Run("at most max_in_flight leased at once, across workers; a record frees a slot", func(t *testing.T) {
		t.Parallel()
		c, db := fanSetup(t, 0)
		a, b := newEndpoint(t, db, "a"), newEndpoint(t, db, "b")
		limit(t, db, a, 0, 0, 0, 3)
		events(t, db, 20)
		other := newClaimant(t, db, 10, 30*time.Second, false) // a second worker
		got, wait := claimDry(t, c, webhook.Query{})
		more, _ := claimDry(t, other, webhook.Query{})
		if n := len(got[a]) + len(more[a]); n != 3 {
			t.Fatalf("a: %d deliveries leased, want its max_in_flight 3", n)
		}
		if n := len(got[b]) + len(more[b]); n != 20 {
			t.Fatalf("b (no limit): %d deliveries leased, want all 20", n)
		}
		if wait <= 0 {
			t.Fatalf("a at its most in flight with rows due: FlowWait %v, want a time to look again", wait)
		}
		held := append(got[a], more[a]...)
		write(t, c, outcome(held[0], webhook.Done), outcome(held[1], webhook.Done))
		again, _ := claimDry(t, other, webhook.Query{})
		if len(again[a]) != 2 {
			t.Fatalf("after 2 of a's recorded: %d more leased, want 2", len(again[a]))
		}
	})

	t.Run("a rate holds across workers: burst at once, then the refill", func(t *testing.T) {
		t.Parallel()
		c, db := fanSetup(t, 0)
		a := newEndpoint(t, db, "a")
		limit(t, db, a, 1, 60, 4, 0) // 1/m with 4 at once: the bucket holds 4
		events(t, db, 12)
		other := newClaimant(t, db, 10, 30*time.Second, false)
		total := 0
		var wait time.Duration
		for range 3 {
			got, w := claimDry(t, c, webhook.Query{})
			more, _ := claimDry(t, other, webhook.Query{})
			total += len(got[a]) + len(more[a])
			wait = w
		}
		// Within a minute of its first claim the bucket refills by at
		// most one.
		if total < 4 || total > 5 {
			t.Fatalf("a at 1/m, burst 4: %d deliveries leased, want 4 (5 if a minute passed)", total)
		}
		if wait <= 0 || wait > time.Minute {
			t.Fatalf("out of tokens: FlowWait %v, want until the next token (at most a minute)", wait)
		}
		var tokens float64
		if err := db.Pool.QueryRow(context.Background(), `SELECT tokens FROM webhook_flow WHERE endpoint_id = $1`, a).Scan(&tokens); err != nil {
			t.Fatal(err)
		}
		if tokens >= 1 || tokens < 0 {
			t.Fatalf("bucket after the burst: %v tokens, want under 1 and not below 0", tokens)
		}
	})

	t.Run("a pause stops every claim of its endpoint until it ends; the others go on", func(t *testing.T) {
		t.Parallel()
		c, db := fanSetup(t, 0)
		a, b := newEndpoint(t, db, "a"), newEndpoint(t, db, "b")
		events(t, db, 1)
		got, _ := claimDry(t, c, webhook.Query{})
		if len(got[a]) != 1 || len(got[b]) != 1 {
			t.Fatalf("before the pause: %d of a, %d of b, want 1 each", len(got[a]), len(got[b]))
		}
		paused := outcome(got[a][0], webhook.Retry)
		paused.Attempt, paused.Delay, paused.Pause, paused.EndpointID = 2, 1500*time.Millisecond, 1500*time.Millisecond, a
		write(t, c, paused, outcome(got[b][0], webhook.Done))
		var until time.Time
		if err := db.Pool.QueryRow(context.Background(), `SELECT paused_until FROM webhook_flow WHERE endpoint_id = $1`, a).Scan(&until); err != nil {
			t.Fatalf("the pause was not written: %v", err)
		}
		events(t, db, 3)
		other := newClaimant(t, db, 10, 30*time.Second, false)
		during, wait := claimDry(t, other, webhook.Query{})
		if time.Now().Before(until) && len(during[a]) != 0 {
			t.Fatalf("paused: %d of a's deliveries leased", len(during[a]))
		}
		if len(during[b]) != 3 {
			t.Fatalf("b beside the pause: %d leased, want 3", len(during[b]))
		}
		if wait <= 0 || wait > 1500*time.Millisecond {
			t.Fatalf("paused: FlowWait %v, want the pause's end", wait)
		}
		var after map[string][]webhook.Delivery
		waitfor.True(t, 30*time.Second, "a's deliveries once its pause ended", func() bool {
			after, _ = claimDry(t, other, webhook.Query{})
			return len(after[a]) > 0
		})
		if len(after[a]) < 3 {
			t.Fatalf("after the pause: %d of a's deliveries, want its 3 new ones", len(after[a]))
		}
	})

	t.Run("the WEBHOOK_URL endpoint's limits are the worker's; its pause closes the plain path", func(t *testing.T) {
		t.Parallel()
		c, db := claimSetup(t, 10, 30*time.Second)
		events(t, db, 10)
		q := webhook.Query{EnvFlow: webhook.Flow{MaxInFlight: 2}}
		got, _ := claimDry(t, c, q)
		if len(got[""]) != 2 {
			t.Fatalf("WEBHOOK_MAX_IN_FLIGHT 2: %d leased, want 2", len(got[""]))
		}
		held := got[""]
		paused := outcome(held[0], webhook.Retry)
		paused.Attempt, paused.Delay, paused.Pause = 2, time.Hour, time.Hour
		write(t, c, paused, outcome(held[1], webhook.Done))
		// Without limits of its own, the plain path: closed while paused.
		fresh := newClaimant(t, db, 10, 30*time.Second, true)
		during, wait := claimDry(t, fresh, webhook.Query{})
		if len(during[""]) != 0 {
			t.Fatalf("paused: %d of the WEBHOOK_URL endpoint's deliveries leased", len(during[""]))
		}
		if wait <= 0 {
			t.Fatalf("paused: FlowWait %v, want the pause's end", wait)
		}
		if outbox.PlainOpen(fresh.Store) {
			t.Fatal("the plain path stayed open beside the WEBHOOK_URL endpoint's pause")
		}
	})
}
