package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// A row the sender did not attempt (NotAttempted: its endpoint's secret
// cannot be opened) is deferred as a gate's refusal defers it: the same
// attempt, later, even at the last attempt; never retried as a failure
// nor dead-lettered; the breaker is told nothing, no attempt is timed.
func TestNotAttemptedIsDeferredNeverDead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		backoffMax time.Duration
		want       time.Duration
	}{
		{"the default deferral", 0, time.Hour, NotAttemptedDelay},
		{"cut to BackoffMax", 0, 200 * time.Millisecond, 200 * time.Millisecond},
		{"the sender's own", 5 * time.Second, time.Hour, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{}
			row := tableRow(7, 5) // the last attempt MaxAttempts allows
			st.push(claimStep{batch: rowsOf(row)})
			snd := &fakeSender{fn: func(context.Context, webhook.Delivery) webhook.Result {
				return webhook.Result{Class: webhook.NotAttempted, Error: "endpoint orders: its secret cannot be opened", RetryAfter: tc.retryAfter}
			}}
			gate := &fakeGate{decide: func(context.Context, webhook.Delivery) Decision { return Decision{Allow: true, Probe: true} }}
			h := run(t, st, snd, Config{MaxAttempts: 5, BackoffBase: time.Second, BackoffMax: tc.backoffMax, DeferMax: time.Second,
				Gate: gate})
			waitUntil(t, "the row's outcome recorded", func() bool { return st.has(7) })
			h.stop(t)

			got := st.outcomes(t)[7]
			want := webhook.Outcome{ID: row.ID, Token: row.Token, Kind: webhook.Defer, Attempt: 5, Delay: tc.want}
			if got != want {
				t.Errorf("outcome\n got %+v\nwant %+v", got, want)
			}
			if _, recorded := gate.seen(); len(recorded) != 0 {
				t.Errorf("the gate was told %v of an attempt never made", recorded)
			}
			checkOutcomeMetrics(t, h, "deferred", "orders", false, webhook.NotAttempted)
		})
	}
}
