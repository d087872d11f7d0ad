package dispatcher

import (
	"context"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/fluxora/webhook-worker/webhook"
)

// When ctx ends, Run claims no more, lets the sends in flight finish under
// work and records them, releases the rows it had not started, and returns;
// when work ends too (the shutdown timeout), the sends cut short are
// released. Not parallel: goleak checks that no goroutine is left behind.
func TestShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		name string
		// stopping runs once row 1's send has started and returns the
		// row ids it expects released besides.
		stopping func(t *testing.T, h *harness, st *fakeStore) []int64
		noGate   bool    // Config.Gate nil
		timeout  bool    // work ends too, before the send returns
		done     []int64 // rows recorded done
	}{
		{
			name: "rows claimed as ctx ends are released unstarted; the send in flight finishes and is recorded",
			stopping: func(t *testing.T, h *harness, st *fakeStore) []int64 {
				st.push(claimStep{batch: rowsOf(tableRow(2, 1), tableRow(3, 4)), hook: h.cancel})
				h.poke()
				return []int64{2, 3}
			},
			done: []int64{1},
		},
		{
			name: "no Gate: rows claimed as ctx ends are released unstarted; the send in flight is recorded",
			stopping: func(t *testing.T, h *harness, st *fakeStore) []int64 {
				st.push(claimStep{batch: rowsOf(tableRow(2, 1), tableRow(3, 4)), hook: h.cancel})
				h.poke()
				return []int64{2, 3}
			},
			noGate: true, done: []int64{1},
		},
		{
			name: "a gate check under way as ctx ends: released unsent",
			stopping: func(t *testing.T, h *harness, st *fakeStore) []int64 {
				st.push(claimStep{batch: rowsOf(tableRow(2, 1))})
				h.poke()
				waitUntil(t, "row 2's gate check", func() bool { c, _ := h.gate.seen(); return slices.Contains(c, 2) })
				h.cancel()
				return []int64{2}
			},
			done: []int64{1},
		},
		{
			name: "the shutdown timeout cuts the send short: released, the gate not told",
			stopping: func(t *testing.T, h *harness, st *fakeStore) []int64 {
				h.cancel()
				h.cancelWork()
				return []int64{1}
			},
			timeout: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snd, started, release := blocking()
			defer close(release)
			st := &fakeStore{}
			st.push(claimStep{batch: rowsOf(tableRow(1, 1))})
			// Row 1 passes the gate; row 2's check hangs until ctx ends.
			gate := &fakeGate{decide: func(ctx context.Context, r webhook.Delivery) Decision {
				if r.ID == 2 {
					<-ctx.Done()
				}
				return Decision{Allow: true}
			}}
			cfg := Config{Gate: gate}
			if tc.noGate {
				cfg.Gate = nil
			}
			h := run(t, st, snd, cfg)
			h.gate = gate
			receive(t, started, 1)
			released := tc.stopping(t, h, st)
			waitUntil(t, "the unstarted rows released", func() bool { return st.has(released...) })
			claims := len(st.claimQueries())
			if !tc.timeout {
				select {
				case <-h.ran:
					t.Fatal("Run returned with a send in flight")
				default:
				}
				release <- struct{}{}
			}
			h.waitRun(t)

			if n := len(st.claimQueries()); n != claims {
				t.Errorf("%d claims after ctx ended, want none", n-claims)
			}
			got := st.outcomes(t)
			if len(got) != len(released)+len(tc.done) {
				t.Errorf("outcomes %+v, want %v released and %v done", got, released, tc.done)
			}
			for _, id := range released {
				if o := got[id]; o != (webhook.Outcome{ID: id, Token: tableRow(id, 1).Token, Kind: webhook.Release}) {
					t.Errorf("row %d: %+v, want released", id, o)
				}
			}
			for _, id := range tc.done {
				if got[id].Kind != webhook.Done {
					t.Errorf("row %d: %+v, want done", id, got[id])
				}
			}
			if sent := snd.sentIDs(); !slices.Equal(sent, []int64{1}) {
				t.Errorf("sent %v, want only row 1", sent)
			}
			if _, told := gate.seen(); !tc.noGate && len(told) != len(tc.done) {
				t.Errorf("gate told %v, want %d", told, len(tc.done))
			}
			for _, c := range st.recordCalls() {
				if c.ctxErr != nil {
					t.Errorf("outcomes written under an ended context: %v", c.ctxErr)
				}
			}
			for name, want := range map[string]float64{
				"fluxora_webhook_rows_released_total": float64(len(released)),
				"fluxora_webhook_rows_in_flight":      0,
			} {
				if v := metric(t, h.reg, name); v != want {
					t.Errorf("%s = %v, want %v", name, v, want)
				}
			}
			if v := metric(t, h.reg, "fluxora_webhook_attempt_duration_seconds", "result", "delivered"); v != float64(len(tc.done)) {
				t.Errorf("attempts delivered = %v, want %v", v, len(tc.done))
			}
			if recs := h.logs.find("released rows not started"); len(recs) == 0 {
				t.Error("no log of the released rows")
			}
		})
	}
}
