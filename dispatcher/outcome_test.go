package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// One claimed row, one attempt (or none): the outcome the Store is given,
// what the Sender, Gate and Disabler saw, and the metrics.
func TestOutcomeOfOneRow(t *testing.T) {
	t.Parallel()
	unavailable := webhook.Result{Class: webhook.Retryable, Status: 503, Error: "503 Service Unavailable", Duration: 10 * time.Millisecond}
	retryAfter := func(d time.Duration) webhook.Result {
		return webhook.Result{Class: webhook.Retryable, Status: 429, Error: "429 Too Many Requests", RetryAfter: d, Duration: time.Millisecond}
	}
	gone := webhook.Result{Class: webhook.Permanent, Status: 410, Error: "410 Gone", Duration: 2 * time.Millisecond}
	failed := func(o webhook.Outcome, r webhook.Result) webhook.Outcome {
		if o.Error == "" {
			o.Error = r.Error
		}
		o.Status, o.Health, o.Started, o.Took = r.Status, webhook.Failing, t0, r.Duration
		o.AttemptClass, o.AttemptError = r.Class.String(), r.Error
		return o
	}
	for _, tc := range []struct {
		name    string
		row     webhook.Delivery
		cfg     func(*Config) // on MaxAttempts 5, BackoffBase 1s, BackoffMax 1h, DeferMax 1m, Rand 0.5
		gate    *Decision     // nil: no Gate
		res     webhook.Result
		want    webhook.Outcome // ID and Token are the row's
		delayIn [2]time.Duration
		sent    bool
		disable bool   // the Disabler is asked to disable ep-1
		label   string // the outcome label of fluxora_webhook_deliveries_total; "" none
	}{
		{
			name: "2xx: done, endpoint healthy",
			row:  tableRow(7, 1),
			res:  webhook.Result{Class: webhook.Delivered, Status: 200, Duration: 30 * time.Millisecond},
			want: webhook.Outcome{Kind: webhook.Done, Status: 200, Health: webhook.Healthy, Started: t0, Took: 30 * time.Millisecond},
			sent: true, label: "delivered",
		},
		{
			name: "retryable below MaxAttempts: retry as attempt+1 after base<<(n-1), jitter at its middle",
			row:  tableRow(7, 3),
			res:  unavailable,
			want: failed(webhook.Outcome{Kind: webhook.Retry, Attempt: 4, Delay: 4 * time.Second}, unavailable),
			sent: true, label: "retried",
		},
		{
			name: "retryable: jitter at its low bound (-20%)",
			row:  tableRow(7, 3),
			cfg:  func(c *Config) { c.Rand = func() float64 { return 0 } },
			res:  unavailable,
			want: failed(webhook.Outcome{Kind: webhook.Retry, Attempt: 4, Delay: 3200 * time.Millisecond}, unavailable),
			sent: true, label: "retried",
		},
		{
			name:    "retryable: jitter near its high bound (+20%)",
			row:     tableRow(7, 3),
			cfg:     func(c *Config) { c.Rand = func() float64 { return 0.999999 } },
			res:     unavailable,
			want:    failed(webhook.Outcome{Kind: webhook.Retry, Attempt: 4}, unavailable),
			delayIn: [2]time.Duration{4790 * time.Millisecond, 4800 * time.Millisecond},
			sent:    true, label: "retried",
		},
		{
			name: "retryable: the backoff is capped by BackoffMax",
			row:  tableRow(7, 12),
			cfg:  func(c *Config) { c.MaxAttempts, c.BackoffMax = 16, time.Minute },
			res:  unavailable,
			want: failed(webhook.Outcome{Kind: webhook.Retry, Attempt: 13, Delay: time.Minute}, unavailable),
			sent: true, label: "retried",
		},
		{
			name: "retryable at MaxAttempts: dead, gave up",
			row:  tableRow(7, 5),
			res:  webhook.Result{Class: webhook.Retryable, Error: "timeout", Duration: 5 * time.Second},
			want: failed(webhook.Outcome{Kind: webhook.Dead, Attempt: 5, Error: "gave up after 5 attempts: timeout"},
				webhook.Result{Class: webhook.Retryable, Error: "timeout", Duration: 5 * time.Second}),
			sent: true, label: "dead_lettered",
		},
		{
			name: "retryable past MaxAttempts (a replayed row): dead, gave up",
			row:  tableRow(7, 9),
			res:  unavailable,
			want: failed(webhook.Outcome{Kind: webhook.Dead, Attempt: 9, Error: "gave up after 9 attempts: 503 Service Unavailable"}, unavailable),
			sent: true, label: "dead_lettered",
		},
		{
			name: "permanent: dead at the first attempt",
			row:  tableRow(7, 1),
			res:  webhook.Result{Class: webhook.Permanent, Status: 400, Error: "400 Bad Request", Duration: time.Millisecond},
			want: failed(webhook.Outcome{Kind: webhook.Dead, Attempt: 1}, webhook.Result{Class: webhook.Permanent, Status: 400, Error: "400 Bad Request", Duration: time.Millisecond}),
			sent: true, label: "dead_lettered",
		},
		{
			name: "Retry-After longer than the backoff is the floor, and pauses the endpoint as long",
			row:  tableRow(7, 1),
			res:  retryAfter(30 * time.Second),
			want: failed(webhook.Outcome{Kind: webhook.Retry, Attempt: 2, Delay: 30 * time.Second, Pause: 30 * time.Second,
				EndpointID: "ep-1"}, retryAfter(30*time.Second)),
			sent: true, label: "retried",
		},
		{
			name: "Retry-After shorter than the backoff leaves the retry's delay, and pauses the endpoint as long",
			row:  tableRow(7, 4),
			res:  retryAfter(2 * time.Second),
			want: failed(webhook.Outcome{Kind: webhook.Retry, Attempt: 5, Delay: 8 * time.Second, Pause: 2 * time.Second,
				EndpointID: "ep-1"}, retryAfter(2*time.Second)),
			sent: true, label: "retried",
		},
		{
			name: "Retry-After is capped by BackoffMax, the pause too",
			row:  tableRow(7, 1),
			cfg:  func(c *Config) { c.BackoffMax = time.Minute },
			res:  retryAfter(time.Hour),
			want: failed(webhook.Outcome{Kind: webhook.Retry, Attempt: 2, Delay: time.Minute, Pause: time.Minute, EndpointID: "ep-1"},
				retryAfter(time.Hour)),
			sent: true, label: "retried",
		},
		{
			name: "410 Gone from a table endpoint: dead, the endpoint disabled",
			row:  tableRow(7, 2),
			res:  gone,
			want: failed(webhook.Outcome{Kind: webhook.Dead, Attempt: 2}, gone),
			sent: true, disable: true, label: "dead_lettered",
		},
		{
			name: "410 Gone from the WEBHOOK_URL endpoint: dead, nothing to disable",
			row:  envRow(7, 2),
			res:  gone,
			want: failed(webhook.Outcome{Kind: webhook.Dead, Attempt: 2}, gone),
			sent: true, label: "dead_lettered",
		},
		{
			name: "endpoint disabled since the row was made: dead unsent, attempts made so far",
			row: func() webhook.Delivery {
				r := tableRow(7, 3)
				r.Enabled, r.DisabledReason = false, "410 Gone"
				return r
			}(),
			gate: &Decision{Allow: true},
			want: webhook.Outcome{Kind: webhook.Dead, Attempt: 2, Error: "endpoint orders disabled: 410 Gone"},
			// A dead letter with no attempt is not counted as one.
			label: "dead_lettered",
		},
		{
			name: "gate refuses: deferred unsent, same attempt, its delay",
			row:  tableRow(7, 3),
			gate: &Decision{DeferFor: 300 * time.Millisecond},
			want: webhook.Outcome{Kind: webhook.Defer, Attempt: 3, Delay: 300 * time.Millisecond}, label: "deferred",
		},
		{
			name: "gate refuses for zero: raised to 1ms",
			row:  tableRow(7, 1),
			gate: &Decision{},
			want: webhook.Outcome{Kind: webhook.Defer, Attempt: 1, Delay: time.Millisecond}, label: "deferred",
		},
		{
			name: "gate refuses for a negative time: raised to 1ms",
			row:  tableRow(7, 1),
			gate: &Decision{DeferFor: -time.Hour},
			want: webhook.Outcome{Kind: webhook.Defer, Attempt: 1, Delay: time.Millisecond}, label: "deferred",
		},
		{
			name: "gate refuses for longer than DeferMax: cut to DeferMax",
			row:  tableRow(7, 1),
			gate: &Decision{DeferFor: 2 * time.Hour},
			want: webhook.Outcome{Kind: webhook.Defer, Attempt: 1, Delay: time.Minute}, label: "deferred",
		},
		{
			name: "gate refuses, no DeferMax: cut to BackoffMax",
			row:  tableRow(7, 1),
			cfg:  func(c *Config) { c.DeferMax, c.BackoffMax = 0, 90*time.Second },
			gate: &Decision{DeferFor: 2 * time.Hour},
			want: webhook.Outcome{Kind: webhook.Defer, Attempt: 1, Delay: 90 * time.Second}, label: "deferred",
		},
		{
			name: "gate allows a probe: sent, the gate told of the probe's class",
			row:  tableRow(7, 2),
			gate: &Decision{Allow: true, Probe: true},
			res:  unavailable,
			want: failed(webhook.Outcome{Kind: webhook.Retry, Attempt: 3, Delay: 2 * time.Second}, unavailable),
			sent: true, label: "retried",
		},
		{
			name: "gate allows: sent, the gate told of the class",
			row:  envRow(7, 1),
			gate: &Decision{Allow: true},
			res:  webhook.Result{Class: webhook.Delivered, Status: 204},
			want: webhook.Outcome{Kind: webhook.Done, Status: 204, Health: webhook.Healthy, Started: t0},
			sent: true, label: "delivered",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{}
			st.push(claimStep{batch: rowsOf(tc.row)})
			snd := &fakeSender{fn: func(context.Context, webhook.Delivery) webhook.Result { return tc.res }}
			off := &fakeDisabler{}
			cfg := Config{MaxAttempts: 5, BackoffBase: time.Second, BackoffMax: time.Hour, DeferMax: time.Minute,
				EnvEndpoint: true, Disabler: off}
			var gate *fakeGate
			if tc.gate != nil {
				gate = &fakeGate{decide: func(context.Context, webhook.Delivery) Decision { return *tc.gate }}
				cfg.Gate = gate
			}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			h := run(t, st, snd, cfg)
			waitUntil(t, "the row's outcome recorded", func() bool { return st.has(7) })
			h.stop(t)

			got := st.outcomes(t)[7]
			want := tc.want
			want.ID, want.Token = tc.row.ID, tc.row.Token
			if tc.delayIn != [2]time.Duration{} {
				if got.Delay < tc.delayIn[0] || got.Delay > tc.delayIn[1] {
					t.Errorf("delay %v, want within %v", got.Delay, tc.delayIn)
				}
				want.Delay = got.Delay
			}
			if got != want {
				t.Errorf("outcome\n got %+v\nwant %+v", got, want)
			}
			if n := len(st.recordCalls()); n != 1 {
				t.Errorf("%d Record calls, want 1", n)
			}

			sent := snd.sentIDs()
			if tc.sent != (len(sent) == 1) || len(sent) > 1 {
				t.Errorf("sent %v, want sent: %v", sent, tc.sent)
			}
			if gate != nil {
				checked, recorded := gate.seen()
				if wantChecked := tc.row.Enabled || tc.row.EndpointID == ""; (len(checked) == 1) != wantChecked {
					t.Errorf("gate checked %v, want checked: %v", checked, wantChecked)
				}
				var wantRecorded []gateRecord
				if tc.sent {
					wantRecorded = []gateRecord{{7, tc.res.Class, tc.gate.Probe}}
				}
				if len(recorded) != len(wantRecorded) || (len(recorded) == 1 && recorded[0] != wantRecorded[0]) {
					t.Errorf("gate told %v, want %v", recorded, wantRecorded)
				}
			}
			var wantOff [][2]string
			if tc.disable {
				wantOff = [][2]string{{"ep-1", "410 Gone"}}
			}
			if calls := off.seen(); len(calls) != len(wantOff) || (len(calls) == 1 && calls[0] != wantOff[0]) {
				t.Errorf("disabler asked %v, want %v", calls, wantOff)
			}

			endpoint := "orders"
			if tc.row.EndpointID == "" {
				endpoint = DefaultEndpointName
			}
			checkOutcomeMetrics(t, h, tc.label, endpoint, tc.sent, tc.res.Class)
			for _, secret := range []string{"payload-secret-4242", "whsec-do-not-log"} {
				if h.logs.mentions(secret) {
					t.Errorf("a log record holds %q", secret)
				}
			}
		})
	}
}

// checkOutcomeMetrics checks the metrics of one claimed row whose recorded
// outcome has deliveries label label.
func checkOutcomeMetrics(t *testing.T, h *harness, label, endpoint string, sent bool, class webhook.Class) {
	t.Helper()
	for _, l := range []string{"delivered", "retried", "dead_lettered", "deferred"} {
		want := 0.0
		if l == label {
			want = 1
		}
		if got := metric(t, h.reg, "fluxora_webhook_deliveries_total", "outcome", l, "endpoint", endpoint); got != want {
			t.Errorf("deliveries_total{outcome=%q,endpoint=%q} = %v, want %v", l, endpoint, got, want)
		}
	}
	counters := map[string]string{
		"fluxora_webhook_retries_scheduled_total": "retried",
		"fluxora_webhook_dead_letters_total":      "dead_lettered",
		"fluxora_webhook_deferred_total":          "deferred",
	}
	for name, l := range counters {
		want := 0.0
		if l == label {
			want = 1
		}
		if got := metric(t, h.reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	attempts := metric(t, h.reg, "fluxora_webhook_attempt_duration_seconds", "result", class.String(), "endpoint", endpoint)
	if want := map[bool]float64{true: 1}[sent]; attempts != want {
		t.Errorf("attempt_duration_seconds{result=%q} count = %v, want %v", class, attempts, want)
	}
	lag, lagSum := metric(t, h.reg, "fluxora_webhook_end_to_end_lag_seconds", "endpoint", endpoint),
		histSum(t, h.reg, "fluxora_webhook_end_to_end_lag_seconds", "endpoint", endpoint)
	if label == "delivered" && (lag != 1 || lagSum != 2) {
		t.Errorf("end_to_end_lag_seconds: count %v sum %v, want 1 and 2 (created 2s before the clock)", lag, lagSum)
	}
	if label != "delivered" && lag != 0 {
		t.Errorf("end_to_end_lag_seconds count %v, want 0", lag)
	}
	for name, want := range map[string]float64{
		"fluxora_webhook_rows_in_flight":         0,
		"fluxora_webhook_claimed_rows_total":     1,
		"fluxora_webhook_claimed_batches_total":  1,
		"fluxora_webhook_outcome_flush_size":     1,
		"fluxora_webhook_commit_errors_total":    0,
		"fluxora_webhook_leases_lost_total":      0,
		"fluxora_webhook_rows_released_total":    0,
		"fluxora_webhook_leases_reclaimed_total": 0,
	} {
		if got := metric(t, h.reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}
