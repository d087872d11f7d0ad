package endpoints_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// secret is what the tests give every endpoint: no output may contain it.
const secret = "whsec_do_not_print_me"

type bundle struct {
	db  *testdb.DB
	reg *prometheus.Registry
}

func setup(t *testing.T) (*endpoints.Store, bundle) {
	t.Helper()
	b := bundle{db: testdb.New(t), reg: prometheus.NewRegistry()}
	s, err := endpoints.New(endpoints.Config{Pool: b.db.Pool, Registerer: b.reg, Sealer: testSealer{}})
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

func add(t *testing.T, s *endpoints.Store, name string, events ...string) endpoints.Endpoint {
	t.Helper()
	e, err := s.Add(context.Background(), name, "https://hooks.example.com/"+name, events, secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func exec(t *testing.T, db *testdb.DB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// pending inserts deliveries for endpoint id: due (n), scheduled in an hour
// (n), and one held under a live lease.
func pending(t *testing.T, db *testdb.DB, id string, n int) {
	t.Helper()
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
		SELECT 'e', '{}', $1, now() + CASE WHEN g % 2 = 0 THEN interval '1 hour' ELSE interval '0' END
		FROM generate_series(1, $2) g`, id, 2*n)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, locked_until, lease_token, attempt)
		VALUES ('e', '{}', $1, now() + interval '1 minute', gen_random_uuid(), 3)`, id)
}

func disabledCount(t *testing.T, reg *prometheus.Registry, cause string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fluxora_webhook_endpoints_disabled_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == cause {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series for reason %q", cause)
	return 0
}

func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := endpoints.New(endpoints.Config{}); err == nil || !strings.Contains(err.Error(), "Pool") {
		t.Fatalf("want an error naming Pool, got %v", err)
	}
	_, b := setup(t)
	if n := testutil.CollectAndCount(b.reg, "fluxora_webhook_endpoints_disabled_total"); n != 3 {
		t.Fatalf("%d series registered at New, want gone, failing and operator", n)
	}
}

func TestAddListGetUpdate(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	e, err := s.Add(ctx, "billing", "https://hooks.example.com/in?token=abc", []string{"invoice.paid", "invoice.paid", "refund"}, secret, 5)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID == "" || e.Name != "billing" || !e.Enabled || e.RetryRPS != 5 || strings.Join(e.EventTypes, ",") != "invoice.paid,refund" ||
		e.CreatedAt.IsZero() || e.FailingSince != nil {
		t.Fatalf("added %+v", e)
	}
	add(t, s, "alpha")
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "billing" || len(list[0].EventTypes) != 0 || list[0].EventTypes == nil {
		t.Fatalf("list %+v %v", list, err)
	}

	t.Run("update each field", func(t *testing.T) {
		url, zero, all := "http://127.0.0.1:9000/hook", 0, []string{}
		got, err := s.Update(ctx, "billing", endpoints.Update{URL: &url, RetryRPS: &zero, Events: &all})
		if err != nil || got.URL != url || got.RetryRPS != 0 || len(got.EventTypes) != 0 || !got.UpdatedAt.After(e.UpdatedAt) {
			t.Fatalf("update: %+v %v", got, err)
		}
		one := []string{"x"}
		if got, err = s.Update(ctx, "billing", endpoints.Update{Events: &one}); err != nil || got.URL != url || got.EventTypes[0] != "x" {
			t.Fatalf("events only: %+v %v", got, err)
		}
		if got, err := s.Get(ctx, "billing"); err != nil || got.URL != url || got.EventTypes[0] != "x" {
			t.Fatalf("get: %+v %v", got, err)
		}
		star, pattern := []string{"*"}, []string{"invoice.*"}
		if got, err = s.Update(ctx, "billing", endpoints.Update{Events: &star}); err != nil || got.EventTypes == nil || len(got.EventTypes) != 0 {
			t.Fatalf(`"*" alone: %+v %v, want every type (the empty list)`, got, err)
		}
		if got, err = s.Update(ctx, "billing", endpoints.Update{Events: &pattern}); err != nil || len(got.EventTypes) != 1 || got.EventTypes[0] != "invoice.*" {
			t.Fatalf("a pattern: %+v %v", got, err)
		}
		if _, err = s.Update(ctx, "billing", endpoints.Update{Events: &one}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("update refuses", func(t *testing.T) {
		bad, neg, empty := "http://example.com/", -1, []string{""}
		inner, mixed := []string{"in*voice"}, []string{"a", "*"}
		for _, u := range []endpoints.Update{{}, {URL: &bad}, {RetryRPS: &neg}, {Events: &empty}, {Events: &inner}, {Events: &mixed}} {
			if _, err := s.Update(ctx, "billing", u); !errors.As(err, new(*endpoints.FieldError)) {
				t.Errorf("%+v: %v, want a FieldError", u, err)
			}
		}
		ok := "https://hooks.example.com/"
		if _, err := s.Update(ctx, "nope", endpoints.Update{URL: &ok}); !errors.Is(err, endpoints.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
			t.Fatalf("unknown: %v", err)
		}
	})
	t.Run("get unknown", func(t *testing.T) {
		if _, err := s.Get(ctx, "ghost"); !errors.Is(err, endpoints.ErrNotFound) || err.Error() != `no endpoint named "ghost"` {
			t.Fatalf("%v", err)
		}
	})
}

// Bad values are refused before the round trip with an error naming the
// field and the rule, never quoting the URL or the secret.
func TestAddRefusesBadValues(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	for _, tc := range []struct {
		name, url string
		events    []string
		secret    string
		rps       int
		field     string
		want      string
	}{
		{"plain", "http://example.com/", nil, secret, 0, "url", "must be https (http only for a loopback host)"},
		{"creds", "https://user:hunter2@example.com/", nil, secret, 0, "url", "must not contain credentials"},
		{"rel", "/hooks", nil, secret, 0, "url", "must be an absolute URL"},
		{"empty-url", "", nil, secret, 0, "url", "must not be empty"},
		{"bad name!", "https://example.com/", nil, secret, 0, "name", `"bad name!": must be 1-64 letters`},
		{"", "https://example.com/", nil, secret, 0, "name", "must be 1-64"},
		{"default", "https://example.com/", nil, secret, 0, "name", `"default" is reserved for the WEBHOOK_URL endpoint`},
		{"Default", "https://example.com/", nil, secret, 0, "name", "reserved"},
		{"ctl", "https://example.com/", []string{"a", "b\nc"}, secret, 0, "events", "each type must be 1-255 bytes"},
		{"blank", "https://example.com/", []string{""}, secret, 0, "events", "each type must be 1-255 bytes"},
		{"nosecret", "https://example.com/", nil, "", 0, "secret", "must not be empty"},
		{"rps", "https://example.com/", nil, secret, -1, "retry-rps", "must be from 1 to 1000000"},
		{"rps-over", "https://example.com/", nil, secret, 1_000_001, "retry-rps", "must be from 1 to 1000000"},
	} {
		_, err := s.Add(context.Background(), tc.name, tc.url, tc.events, tc.secret, tc.rps)
		var fe *endpoints.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Problem, tc.want) {
			t.Errorf("%q: %v, want %s: %s", tc.name, err, tc.field, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "hunter2") || (tc.url != "" && strings.Contains(err.Error(), tc.url)) {
			t.Errorf("%q: the error quotes the URL or the secret: %v", tc.name, err)
		}
	}
	if n := b.db.Count(t, "SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Fatalf("%d endpoints added", n)
	}
}

func TestDuplicateName(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	add(t, s, "dup")
	_, err := s.Add(context.Background(), "dup", "https://other.example.com/", nil, secret, 0)
	if !errors.Is(err, endpoints.ErrExists) || err.Error() != `endpoint "dup" already exists` {
		t.Fatalf("%v", err)
	}
}

// Nothing List or Get return holds the secret, in Go or in JSON.
func TestSecretNeverReturned(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	add(t, s, "a")
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	one, _ := s.Get(ctx, "a")
	out, _ := json.Marshal([]any{list, one})
	if strings.Contains(string(out), secret) || strings.Contains(string(out), "secret") {
		t.Fatalf("secret in %s", out)
	}
}

func TestDisableAndEnable(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	e := add(t, s, "shop")
	other := add(t, s, "other")
	pending(t, b.db, e.ID, 3)
	pending(t, b.db, other.ID, 1)

	moved, err := s.DisableByName(ctx, "shop", "maintenance")
	if err != nil || moved != 6 {
		t.Fatalf("moved %d (%v), want the 6 not under a lease", moved, err)
	}
	if n := b.db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1 AND last_error = 'endpoint shop disabled: maintenance'`, e.ID); n != 6 {
		t.Fatalf("%d dead letters with the reason", n)
	}
	if n := b.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND endpoint_id = $1", other.ID); n != 3 {
		t.Fatalf("other endpoint's rows touched: %d pending", n)
	}
	got, _ := s.Get(ctx, "shop")
	if got.Enabled || got.DisabledReason != "maintenance" || got.DisabledAt == nil {
		t.Fatalf("after disable %+v", got)
	}
	// Again, by id, with another cause: the first reason stays, no count.
	if _, err := s.Disable(ctx, e.ID, endpoints.Gone, "410 Gone"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "shop"); got.DisabledReason != "maintenance" || disabledCount(t, b.reg, "operator") != 1 || disabledCount(t, b.reg, "gone") != 0 {
		t.Fatalf("second disable: %+v", got)
	}

	exec(t, b.db, "UPDATE webhook_endpoints SET failing_since = now() - interval '1 day' WHERE id = $1", e.ID)
	if got, err := s.Enable(ctx, "shop"); err != nil || !got.Enabled || got.DisabledReason != "" || got.DisabledAt != nil || got.FailingSince != nil {
		t.Fatalf("enable: %+v %v", got, err)
	}
	if moved, err := s.Disable(ctx, e.ID, endpoints.Gone, "410 Gone"); err != nil || moved != 0 || disabledCount(t, b.reg, "gone") != 1 {
		t.Fatalf("disable by id: %d %v", moved, err)
	}

	t.Run("refusals", func(t *testing.T) {
		for _, err := range []error{
			func() error { _, err := s.DisableByName(ctx, "ghost", "r"); return err }(),
			func() error { _, err := s.Enable(ctx, "ghost"); return err }(),
			func() error { _, err := s.Disable(ctx, "not-a-uuid", endpoints.Gone, "r"); return err }(),
			func() error {
				_, err := s.Disable(ctx, "11111111-1111-4111-8111-111111111111", endpoints.Failing, "r")
				return err
			}(),
		} {
			if !errors.Is(err, endpoints.ErrNotFound) {
				t.Errorf("%v, want ErrNotFound", err)
			}
		}
		if _, err := s.DisableByName(ctx, "other", ""); !errors.As(err, new(*endpoints.FieldError)) {
			t.Errorf("empty reason: %v", err)
		}
		if _, err := s.Disable(ctx, other.ID, "bored", "r"); err == nil {
			t.Errorf("unknown cause accepted")
		}
	})
}

func TestRemove(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	e := add(t, s, "old")
	pending(t, b.db, e.ID, 2)
	exec(t, b.db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, processed, processed_at) VALUES ('e', '{}', $1, true, now())`, e.ID)

	_, err := s.Remove(ctx, "old", false)
	if !errors.Is(err, endpoints.ErrPending) || !strings.Contains(err.Error(), "5 pending") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("without force: %v", err)
	}
	if n := b.db.Count(t, "SELECT count(*) FROM webhook_endpoints"); n != 1 {
		t.Fatalf("removed without force")
	}
	moved, err := s.Remove(ctx, "old", true)
	if err != nil || moved != 5 {
		t.Fatalf("force: moved %d, %v", moved, err)
	}
	if n := b.db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1 AND last_error = 'endpoint old removed'`, e.ID); n != 5 {
		t.Fatalf("%d dead letters", n)
	}
	if n := b.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") + b.db.Count(t, "SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	// Its history stays until retention drops it (migration 013).
	if n := b.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed"); n != 1 {
		t.Fatalf("%d processed rows kept, want 1", n)
	}
	if _, err := s.Remove(ctx, "old", true); !errors.Is(err, endpoints.ErrNotFound) {
		t.Fatalf("again: %v", err)
	}
	add(t, s, "idle")
	if moved, err := s.Remove(ctx, "idle", false); err != nil || moved != 0 {
		t.Fatalf("idle: %d %v", moved, err)
	}
}

func TestDisableFailing(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	for name, since := range map[string]string{"down": "2 hours", "flaky": "1 minute", "off": "2 hours"} {
		e := add(t, s, name)
		exec(t, b.db, "UPDATE webhook_endpoints SET failing_since = now() - $2::interval WHERE id = $1", e.ID, since)
	}
	add(t, s, "fine")
	down, _ := s.Get(ctx, "down")
	pending(t, b.db, down.ID, 1)
	if _, err := s.DisableByName(ctx, "off", "by hand"); err != nil {
		t.Fatal(err)
	}

	names, err := s.DisableFailing(ctx, time.Hour)
	if err != nil || len(names) != 1 || names[0] != "down" {
		t.Fatalf("disabled %v (%v), want [down]", names, err)
	}
	got, _ := s.Get(ctx, "down")
	if got.Enabled || got.DisabledReason != "every attempt failed since "+down.FailingSince.UTC().Format(time.RFC3339) {
		t.Fatalf("down: %+v", got)
	}
	if n := b.db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1 AND last_error LIKE 'endpoint down disabled: every attempt failed since %'", down.ID); n != 2 {
		t.Fatalf("%d dead letters", n)
	}
	if disabledCount(t, b.reg, "failing") != 1 {
		t.Fatalf("failing not counted")
	}
	if names, err := s.DisableFailing(ctx, time.Hour); err != nil || len(names) != 0 {
		t.Fatalf("second pass: %v %v", names, err)
	}
	// Enabled again, its old run of failures no longer counts.
	if _, err := s.Enable(ctx, "down"); err != nil {
		t.Fatal(err)
	}
	if names, err := s.DisableFailing(ctx, time.Hour); err != nil || len(names) != 0 {
		t.Fatalf("after enable: %v %v", names, err)
	}
}

func TestRunJanitor(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := add(t, s, "down")
	done := make(chan error, 1)
	go func() { done <- s.RunJanitor(ctx, 20*time.Millisecond, time.Minute) }()
	exec(t, b.db, "UPDATE webhook_endpoints SET failing_since = now() - interval '2 minutes' WHERE id = $1", e.ID)
	deadline := time.After(10 * time.Second)
	for b.db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE NOT enabled") == 0 {
		select {
		case <-deadline:
			t.Fatal("janitor did not disable the failing endpoint")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunJanitor: %v", err)
	}
}

// The janitor samples the backlog once a minute of its clock: a pass in
// the same minute writes nothing (the sample deleted meanwhile stays
// deleted), the first pass of the next minute samples again.
func TestRunJanitorSamplesTheBacklogOnceAMinute(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var mu sync.Mutex
	clock := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	s, err := endpoints.New(endpoints.Config{Pool: db.Pool, Sealer: testSealer{}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e := add(t, s, "busy")
	pending(t, db, e.ID, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.RunJanitor(ctx, 5*time.Millisecond, 0) }()
	sampled := func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_backlog_samples WHERE endpoint_id = $1 AND backlog = 5", e.ID) == 1
	}
	waitfor.True(t, 10*time.Second, "the first pass's sample of busy (2 due, 2 scheduled, 1 in flight)", sampled)
	exec(t, db, "DELETE FROM webhook_backlog_samples")
	// Passes of the same minute, each seen erasing an expired previous
	// secret: no sample.
	for i := range 3 {
		if _, err := s.RotateSecret(ctx, "busy", "whsec_next_"+strconv.Itoa(i), time.Hour); err != nil {
			t.Fatal(err)
		}
		exec(t, db, `UPDATE webhook_endpoints SET secret_previous_until = now() - interval '1 second' WHERE name = 'busy'`)
		waitfor.True(t, 10*time.Second, "a janitor pass", func() bool {
			return db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE secret_previous IS NOT NULL") == 0
		})
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_backlog_samples"); n != 0 {
		t.Fatalf("%d sample rows written within the same minute", n)
	}
	mu.Lock()
	clock = clock.Add(time.Minute)
	mu.Unlock()
	waitfor.True(t, 10*time.Second, "the next minute's sample", sampled)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunJanitor: %v", err)
	}
}
