package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxora/webhook-worker/webhook"
)

// What the completer does with the Store's answers: a fence that refuses an
// outcome, a write that fails and then succeeds.
func TestRecordAnswers(t *testing.T) {
	t.Parallel()
	connReset := errors.New("write outcomes: conn reset")
	for _, tc := range []struct {
		name   string
		record func(call int, outcomes []webhook.Outcome) ([]bool, error)
		calls  int     // Record calls
		lost   float64 // leases_lost_total
		errs   float64 // commit_errors_total
		done   []int64 // rows whose outcome was written
		log    string  // a warning logged
	}{
		{
			name: "all written",
			record: func(_ int, o []webhook.Outcome) ([]bool, error) {
				return slices.Repeat([]bool{true}, len(o)), nil
			},
			calls: 1, done: []int64{1, 2},
		},
		{
			name: "the fence refuses row 2: lease lost, its outcome not tried again",
			record: func(_ int, o []webhook.Outcome) ([]bool, error) {
				written := make([]bool, len(o))
				for i, x := range o {
					written[i] = x.ID != 2
				}
				return written, nil
			},
			calls: 1, lost: 1, done: []int64{1}, log: "lease lost",
		},
		{
			name: "a database error: counted, the same outcomes written on the next try, once",
			record: func(call int, o []webhook.Outcome) ([]bool, error) {
				if call == 0 {
					return nil, connReset
				}
				return slices.Repeat([]bool{true}, len(o)), nil
			},
			calls: 2, errs: 1, done: []int64{1, 2}, log: "recording outcomes failed; trying again",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Both rows are held until both have started, so that they
			// are written together.
			snd, started, release := blocking()
			st := &fakeStore{record: tc.record}
			st.push(claimStep{batch: rowsOf(tableRow(1, 1), tableRow(2, 3))})
			h := run(t, st, snd, Config{FlushInterval: time.Hour, FlushMax: 2})
			receive(t, started, 2)
			close(release)
			waitUntil(t, "Record called", func() bool { return len(st.recordCalls()) >= tc.calls })
			h.stop(t)

			calls := st.recordCalls()
			if len(calls) != tc.calls {
				t.Fatalf("%d Record calls, want %d", len(calls), tc.calls)
			}
			for i, c := range calls {
				if len(c.outcomes) != 2 || !slices.Equal(calls[0].outcomes, c.outcomes) {
					t.Errorf("Record call %d: %+v, want the 2 outcomes of the first call", i, c.outcomes)
				}
			}
			got := st.outcomes(t)
			if ids := slices.Sorted(maps.Keys(got)); !slices.Equal(ids, tc.done) {
				t.Errorf("written %v, want %v", ids, tc.done)
			}
			m := h.d.m
			if v := testutil.ToFloat64(m.leasesLost); v != tc.lost {
				t.Errorf("leases_lost_total = %v, want %v", v, tc.lost)
			}
			if v := testutil.ToFloat64(m.commitErrors); v != tc.errs {
				t.Errorf("commit_errors_total = %v, want %v", v, tc.errs)
			}
			// Only what was written is counted, and counted once.
			if v := metric(t, h.reg, "fluxora_webhook_deliveries_total", "outcome", "delivered"); v != float64(len(tc.done)) {
				t.Errorf("deliveries_total{delivered} = %v, want %v", v, len(tc.done))
			}
			if v := metric(t, h.reg, "fluxora_webhook_outcome_flush_size"); v != 1 {
				t.Errorf("outcome_flush_size count = %v, want 1 (one successful write)", v)
			}
			if v := testutil.ToFloat64(m.inFlight); v != 0 {
				t.Errorf("rows_in_flight = %v, want 0", v)
			}
			if tc.log != "" && len(h.logs.find(tc.log)) == 0 {
				t.Errorf("no log %q", tc.log)
			}
			if recs := h.logs.find("lease lost"); tc.lost > 0 && (len(recs) != 1 || recs[0].attrs["delivery_id"] != "d-2") {
				t.Errorf("lease lost logs %+v, want one for d-2", recs)
			}
		})
	}
}

// newCompleter is a completer on st that never flushes by time.
func newCompleter(st Store, max int) (*completer, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return &completer{
		store: st, in: make(chan done, 100), interval: time.Hour, max: max, now: fixedNow,
		log: slog.New(slog.DiscardHandler), m: newMetrics(reg, false), scheduled: make(chan time.Duration, 1),
	}, reg
}

func runCompleter(t *testing.T, c *completer, ctx context.Context) {
	t.Helper()
	finished := make(chan struct{})
	go func() { c.run(ctx); close(finished) }()
	close(c.in)
	select {
	case <-finished:
	case <-time.After(waitTime):
		t.Fatalf("the completer did not finish within %v", waitTime)
	}
}

func TestCompleterBatches(t *testing.T) {
	t.Parallel()
	t.Run("at most FlushMax outcomes per write; the rest when in closes", func(t *testing.T) {
		t.Parallel()
		st := &fakeStore{}
		c, reg := newCompleter(st, 3)
		for i := range 7 {
			c.add(done{row: tableRow(int64(i), 1), outcome: webhook.Outcome{ID: int64(i), Kind: webhook.Done}, label: "orders"})
		}
		runCompleter(t, c, context.Background())
		var sizes []int
		for _, call := range st.recordCalls() {
			sizes = append(sizes, len(call.outcomes))
		}
		if !slices.Equal(sizes, []int{3, 3, 1}) {
			t.Errorf("write sizes %v, want [3 3 1]", sizes)
		}
		if v := metric(t, reg, "fluxora_webhook_outcome_flush_size"); v != 3 {
			t.Errorf("outcome_flush_size count = %v, want 3", v)
		}
	})
	t.Run("the earliest retry or deferral written is handed on, the smallest pending one kept", func(t *testing.T) {
		t.Parallel()
		st := &fakeStore{}
		c, _ := newCompleter(st, 2)
		for i, o := range []webhook.Outcome{
			{Kind: webhook.Retry, Delay: 5 * time.Second}, {Kind: webhook.Defer, Delay: 2 * time.Second}, // first write
			{Kind: webhook.Retry, Delay: 3 * time.Second}, {Kind: webhook.Done}, // second write, while the first is unread
			{Kind: webhook.Dead}, // Dead and Done schedule nothing
		} {
			o.ID = int64(i)
			c.add(done{row: tableRow(o.ID, 1), outcome: o, label: "orders"})
		}
		runCompleter(t, c, context.Background())
		select {
		case got := <-c.scheduled:
			if got != 2*time.Second {
				t.Errorf("scheduled %v, want 2s", got)
			}
		default:
			t.Error("nothing scheduled")
		}
	})
	t.Run("writes failing until the work context ends: given up, the rows left to their leases", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st := &fakeStore{record: func(int, []webhook.Outcome) ([]bool, error) {
			cancel() // the shutdown timeout passes during the write
			return nil, errors.New("conn refused")
		}}
		c, reg := newCompleter(st, 1)
		c.m.inFlight.Add(1)
		c.add(done{row: tableRow(1, 1), outcome: webhook.Outcome{ID: 1, Kind: webhook.Done}, label: "orders"})
		runCompleter(t, c, ctx)
		if n := len(st.recordCalls()); n != 1 {
			t.Errorf("%d Record calls, want 1 (no retry once the context ended)", n)
		}
		for name, want := range map[string]float64{
			"fluxora_webhook_commit_errors_total": 1,
			"fluxora_webhook_rows_in_flight":      0,
			"fluxora_webhook_outcome_flush_size":  0,
		} {
			if got := metric(t, reg, name); got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
	})
	t.Run("the final write after the work context ended gets a context of its own", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		st := &fakeStore{}
		c, _ := newCompleter(st, 10)
		c.add(done{row: tableRow(1, 1), outcome: webhook.Outcome{ID: 1, Kind: webhook.Release}, label: "orders"})
		runCompleter(t, c, ctx)
		calls := st.recordCalls()
		if len(calls) != 1 || calls[0].ctxErr != nil {
			t.Fatalf("Record calls %+v, want one under a live context", calls)
		}
	})
}
