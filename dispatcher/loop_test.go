package dispatcher

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxora/webhook-worker/webhook"
)

func TestNewConfig(t *testing.T) {
	t.Parallel()
	full := func() Config {
		return Config{Store: &fakeStore{}, Sender: &fakeSender{}, Wake: make(chan struct{}),
			Registerer: prometheus.NewRegistry(), Rand: func() float64 { return 0 }}
	}
	for _, tc := range []struct {
		field string
		drop  func(*Config)
	}{
		{"Store", func(c *Config) { c.Store = nil }},
		{"Sender", func(c *Config) { c.Sender = nil }},
		{"Wake", func(c *Config) { c.Wake = nil }},
		{"Registerer", func(c *Config) { c.Registerer = nil }},
		{"Rand", func(c *Config) { c.Rand = nil }},
	} {
		cfg := full()
		tc.drop(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.field+" is required") {
			t.Errorf("New without %s: %v, want an error naming it", tc.field, err)
		}
	}
	// A batch size that is not negative, a lease of at least 1ms.
	for _, tc := range []struct {
		field string
		bad   func(*Config)
	}{
		{"BatchSize", func(c *Config) { c.BatchSize = -1 }},
		{"Lease", func(c *Config) { c.Lease = time.Microsecond }},
		{"Lease", func(c *Config) { c.Lease = -time.Second }},
	} {
		cfg := full()
		tc.bad(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New with a bad %s: %v, want an error naming it", tc.field, err)
		}
	}
	cfg := full()
	cfg.Lease, cfg.EnvEndpoint = time.Minute, true
	if d, err := New(cfg); err != nil || d.query(1).Lease != time.Minute || !d.query(1).Env {
		t.Errorf("a claim of Lease 1m with a WEBHOOK_URL endpoint: %v", err)
	}
	d, err := New(full())
	if err != nil {
		t.Fatal(err)
	}
	c := d.cfg
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"BatchSize", c.BatchSize, BatchSizeDefault},
		{"Lease", c.Lease, LeaseDefault},
		{"Concurrency", c.Concurrency, ConcurrencyDefault},
		{"EndpointConcurrency", c.EndpointConcurrency, 25},
		{"MaxAttempts", c.MaxAttempts, MaxAttemptsDefault},
		{"PollInterval", c.PollInterval, PollIntervalDefault},
		{"SweepInterval", c.SweepInterval, SweepIntervalDefault},
		{"ClaimCooldown", c.ClaimCooldown, ClaimCooldownDefault},
		{"FlushInterval", c.FlushInterval, FlushIntervalDefault},
		{"FlushMax", c.FlushMax, FlushMaxDefault},
		{"BackoffBase", c.BackoffBase, BackoffBaseDefault},
		{"BackoffMax", c.BackoffMax, BackoffMaxDefault},
		{"DeferMax", c.DeferMax, BackoffMaxDefault},
	} {
		if f.got != f.want {
			t.Errorf("%s defaults to %v, want %v", f.name, f.got, f.want)
		}
	}
	if c.Now == nil || d.log == nil {
		t.Error("Now and Logger have no defaults")
	}
	if n := EndpointConcurrencyDefault(2); n != 1 {
		t.Errorf("EndpointConcurrencyDefault(2) = %d, want 1", n)
	}
}

// What wakes the loop besides rows: the next due time, a written deferral,
// the poll, the sweep, a Wake, and the rechecks after a claim found rows.
func TestLoopWakes(t *testing.T) {
	t.Parallel()
	quiet := func(c *Config) { c.PollInterval, c.SweepInterval = time.Hour, time.Hour }
	for _, tc := range []struct {
		name    string
		cfg     func(*Config)
		nextDue func() (time.Duration, bool, error)
		steps   []claimStep
		act     func(t *testing.T, h *harness, st *fakeStore) // once Run started
		until   func(h *harness, st *fakeStore) bool
		check   func(t *testing.T, h *harness, st *fakeStore) // after Run returned
	}{
		{
			name:    "the next due time read at start: the loop claims then, and reads it again",
			cfg:     quiet,
			nextDue: func() (time.Duration, bool, error) { return 5 * time.Millisecond, true, nil },
			until:   func(_ *harness, st *fakeStore) bool { return st.dueCalls() >= 3 && len(st.claimQueries()) >= 3 },
		},
		{
			name: "a deferral written: its due time wakes the loop",
			cfg: func(c *Config) {
				quiet(c)
				c.Gate = &fakeGate{decide: func(context.Context, webhook.Delivery) Decision { return Decision{DeferFor: time.Millisecond} }}
			},
			steps: []claimStep{{batch: rowsOf(tableRow(1, 1))}},
			until: func(_ *harness, st *fakeStore) bool { return st.has(1) && st.dueCalls() >= 2 },
		},
		{
			name:    "reading the next due time failing: logged",
			cfg:     quiet,
			nextDue: func() (time.Duration, bool, error) { return 0, false, errors.New("next due: conn refused") },
			until: func(h *harness, _ *fakeStore) bool {
				return len(h.logs.find("reading the next due time failed")) == 1
			},
		},
		{
			name: "the poll: counted, the next due time read again, a claim",
			cfg:  func(c *Config) { c.PollInterval, c.SweepInterval = 5*time.Millisecond, time.Hour },
			until: func(h *harness, st *fakeStore) bool {
				return testutil.ToFloat64(h.d.m.pollWakeups) >= 2 && st.dueCalls() >= 3
			},
			check: func(t *testing.T, h *harness, st *fakeStore) {
				if n := len(st.claimQueries()); n < 3 {
					t.Errorf("%d claims, want one per poll and one at start", n)
				}
			},
		},
		{
			name:  "the sweep claims when nothing else does",
			cfg:   func(c *Config) { c.PollInterval, c.SweepInterval = time.Hour, 5*time.Millisecond },
			until: func(_ *harness, st *fakeStore) bool { return len(st.claimQueries()) >= 4 },
			check: func(t *testing.T, h *harness, _ *fakeStore) {
				if v := testutil.ToFloat64(h.d.m.pollWakeups); v != 0 {
					t.Errorf("poll_wakeups_total = %v, want 0", v)
				}
			},
		},
		{
			name: "a Wake claims",
			cfg:  quiet,
			act: func(t *testing.T, h *harness, st *fakeStore) {
				waitUntil(t, "the first claim", func() bool { return len(st.claimQueries()) >= 1 })
				st.push(claimStep{batch: rowsOf(tableRow(1, 1))})
				h.poke()
			},
			until: func(_ *harness, st *fakeStore) bool { return st.has(1) },
		},
		{
			name:  "rows found: rechecked after 1, 4, 16, 64 and 256ms, then no more",
			cfg:   quiet,
			steps: []claimStep{{batch: rowsOf(tableRow(1, 1))}},
			until: func(_ *harness, st *fakeStore) bool { return len(st.claimQueries()) >= 6 },
			check: func(t *testing.T, h *harness, st *fakeStore) {
				if n := len(st.claimQueries()); n != 1+len(recheckDelays) || h.d.step != -1 {
					t.Errorf("%d claims, recheck step %d; want %d and -1", n, h.d.step, 1+len(recheckDelays))
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{nextDue: tc.nextDue}
			st.push(tc.steps...)
			var cfg Config
			tc.cfg(&cfg)
			h := run(t, st, &fakeSender{}, cfg)
			if tc.act != nil {
				tc.act(t, h, st)
			}
			waitUntil(t, tc.name, func() bool { return tc.until(h, st) })
			h.stop(t)
			if tc.check != nil {
				tc.check(t, h, st)
			}
		})
	}
}

// The hush is told busy when rows keep coming, not busy when they stop,
// and asked for help when the worker is busy and out of slots.
func TestHush(t *testing.T) {
	t.Parallel()
	fanOut := claimStep{batch: webhook.Batch{FannedOut: 1, Deliveries: 2, Taken: 1, More: true}}
	// A clock an hour on at every reading: no two claims are ever within
	// busyGap, so only claims within one drain make the worker busy, and no
	// claim waits for ClaimCooldown.
	var ticks atomic.Int64
	hourly := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Hour) }
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []claimStep
		rows  []int64
		busy  bool // told busy first
		help  bool
	}{
		{
			name:  "rows found by two claims of one drain (a fan-out, then its rows): busy, then not once they stop",
			cfg:   Config{Now: hourly},
			steps: []claimStep{fanOut, {batch: rowsOf(tableRow(1, 1), tableRow(2, 1))}},
			rows:  []int64{1, 2}, busy: true,
		},
		{
			name:  "a lone row on a sparse stream: never busy",
			cfg:   Config{Now: hourly},
			steps: []claimStep{{batch: rowsOf(tableRow(1, 1))}},
			rows:  []int64{1},
		},
		{
			name:  "busy with every slot taken: asks for help",
			cfg:   Config{Concurrency: 2, BatchSize: 2, EndpointConcurrency: 2, Now: hourly},
			steps: []claimStep{fanOut, {batch: rowsOf(tableRow(1, 1), tableRow(2, 1))}},
			rows:  []int64{1, 2}, busy: true, help: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hush := &fakeHush{}
			snd, started, release := blocking()
			st := &fakeStore{}
			st.push(tc.steps...)
			cfg := tc.cfg
			cfg.Hush = hush
			h := run(t, st, snd, cfg)
			receive(t, started, len(tc.rows))
			if tc.help {
				waitUntil(t, "help asked", func() bool { _, n := hush.seen(); return n > 0 })
			}
			close(release)
			waitUntil(t, "rows recorded", func() bool { return st.has(tc.rows...) })
			h.stop(t)
			sets, helps := hush.seen()
			if tc.busy && (len(sets) < 2 || !sets[0] || sets[len(sets)-1]) {
				t.Errorf("hush told %v, want busy first and not busy last", sets)
			}
			if !tc.busy && slices.Contains(sets, true) {
				t.Errorf("hush told %v, want never busy", sets)
			}
			if (helps > 0) != tc.help {
				t.Errorf("help asked %d times, want asked: %v", helps, tc.help)
			}
		})
	}
}

// A 410 Gone disables the table endpoint when there is a Disabler; its
// failure is logged; without one only the row is dead-lettered.
func TestGone(t *testing.T) {
	t.Parallel()
	gone := webhook.Result{Class: webhook.Permanent, Status: 410, Error: "410 Gone"}
	for _, tc := range []struct {
		name string
		off  *fakeDisabler
		log  string
	}{
		{"disabled", &fakeDisabler{}, "endpoint answered 410 Gone; disabled"},
		{"disabling failing: logged", &fakeDisabler{err: errors.New("disable: conn refused")}, "disabling it failed"},
		{"no Disabler: only dead-lettered", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := &fakeStore{}
			st.push(claimStep{batch: rowsOf(tableRow(1, 1))})
			cfg := Config{}
			if tc.off != nil {
				cfg.Disabler = tc.off
			}
			h := run(t, st, &fakeSender{fn: func(context.Context, webhook.Delivery) webhook.Result { return gone }}, cfg)
			waitUntil(t, "row recorded", func() bool { return st.has(1) })
			h.stop(t)
			if o := st.outcomes(t)[1]; o.Kind != webhook.Dead || o.Status != 410 {
				t.Errorf("outcome %+v, want dead with 410", o)
			}
			if tc.log != "" && len(h.logs.find(tc.log)) != 1 {
				t.Errorf("no log %q", tc.log)
			}
			if tc.off != nil && len(tc.off.seen()) != 1 {
				t.Errorf("disabler asked %v, want once", tc.off.seen())
			}
		})
	}
}
