package endpoints_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/endpoints"
)

// secrets reads what the table holds, for the checks below.
func secrets(t *testing.T, s *endpoints.Store, name string, b bundle) (cur, prev string, until *time.Time) {
	t.Helper()
	var p *string
	var id string
	err := b.db.Pool.QueryRow(context.Background(),
		`SELECT id::text, secret, secret_previous, secret_previous_until FROM webhook_endpoints WHERE name = $1`, name).Scan(&id, &cur, &p, &until)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err = (testSealer{}).OpenSecret(id, cur); err != nil {
		t.Fatal(err)
	}
	if p != nil {
		if prev, err = (testSealer{}).OpenSecret(id, *p); err != nil {
			t.Fatal(err)
		}
	}
	return cur, prev, until
}

func TestRotateSecret(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	add(t, s, "billing")

	var dbNow time.Time
	if err := b.db.Pool.QueryRow(ctx, "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	e, err := s.RotateSecret(ctx, "billing", "whsec_second_do_not_print", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cur, prev, until := secrets(t, s, "billing", b)
	if cur != "whsec_second_do_not_print" || prev != secret || until == nil {
		t.Fatalf("after rotate: current %q, previous %q, until %v", cur, prev, until)
	}
	// The end is the database's now() plus the grace, not the process's.
	if d := until.Sub(dbNow); d < time.Hour || d > time.Hour+time.Minute {
		t.Fatalf("grace ends %s after the database's now before the rotation, want about 1h", d)
	}
	if e.PreviousSecretUntil == nil || !e.PreviousSecretUntil.Equal(*until) {
		t.Fatalf("Endpoint.PreviousSecretUntil = %v, want %v", e.PreviousSecretUntil, until)
	}
	js, _ := json.Marshal(e)
	if strings.Contains(string(js), "do_not_print") {
		t.Fatalf("the endpoint's JSON holds a secret: %s", js)
	}

	// A second rotation keeps only the secret it replaces.
	if _, err := s.RotateSecret(ctx, "billing", "whsec_third_do_not_print", 0); err != nil {
		t.Fatal(err)
	}
	cur, prev, until = secrets(t, s, "billing", b)
	if cur != "whsec_third_do_not_print" || prev != "" || until != nil {
		t.Fatalf("after rotate with no grace: current %q, previous %q, until %v", cur, prev, until)
	}

	// Refusals name the culprit and change nothing.
	for _, tc := range []struct {
		name, secret string
		grace        time.Duration
		field        string
		notFound     bool
	}{
		{"billing", "", time.Hour, "secret", false},
		{"billing", "whsec_third_do_not_print", time.Hour, "secret", false},
		{"billing", "whsec_fourth", -time.Second, "grace", false},
		{"billing", "whsec_fourth", 31 * 24 * time.Hour, "grace", false},
		{"nope", "whsec_fourth", time.Hour, "", true},
	} {
		_, err := s.RotateSecret(ctx, tc.name, tc.secret, tc.grace)
		var fe *endpoints.FieldError
		switch {
		case tc.notFound && !errors.Is(err, endpoints.ErrNotFound):
			t.Errorf("%+v: err = %v, want ErrNotFound", tc, err)
		case !tc.notFound && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%+v: err = %v, want a FieldError on %s", tc, err, tc.field)
		case err != nil && strings.Contains(err.Error(), "do_not_print"):
			t.Errorf("%+v: the error quotes a secret: %v", tc, err)
		}
	}
	if cur2, _, _ := secrets(t, s, "billing", b); cur2 != cur {
		t.Fatal("a refused rotation changed the secret")
	}
}

// Update --secret replaces at once and ends a grace period in progress; an
// expired grace reads as none and the janitor erases its secret.
func TestSecretReplaceAndExpiry(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	add(t, s, "a")
	add(t, s, "b")
	for _, n := range []string{"a", "b"} {
		if _, err := s.RotateSecret(ctx, n, "whsec_new_"+n, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	leaked := "whsec_replacement"
	if _, err := s.Update(ctx, "a", endpoints.Update{Secret: &leaked}); err != nil {
		t.Fatal(err)
	}
	if cur, prev, until := secrets(t, s, "a", b); cur != leaked || prev != "" || until != nil {
		t.Fatalf("after update --secret: current %q, previous %q, until %v", cur, prev, until)
	}

	exec(t, b.db, `UPDATE webhook_endpoints SET secret_previous_until = now() - interval '1 second' WHERE name = 'b'`)
	got, err := s.Get(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got.PreviousSecretUntil != nil {
		t.Fatalf("an expired grace period reads as %v", got.PreviousSecretUntil)
	}
	if n, err := s.ForgetExpiredSecrets(ctx); err != nil || n != 1 {
		t.Fatalf("ForgetExpiredSecrets = %d, %v; want 1", n, err)
	}
	if _, prev, until := secrets(t, s, "b", b); prev != "" || until != nil {
		t.Fatalf("the expired previous secret is still stored (until %v)", until)
	}

	// The janitor erases them even with auto-disable off.
	if _, err := s.RotateSecret(ctx, "b", "whsec_newer_b", time.Hour); err != nil {
		t.Fatal(err)
	}
	exec(t, b.db, `UPDATE webhook_endpoints SET secret_previous_until = now() - interval '1 second' WHERE name = 'b'`)
	jctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.RunJanitor(jctx, 10*time.Millisecond, 0) }()
	deadline := time.After(10 * time.Second)
	for b.db.Count(t, "SELECT count(*) FROM webhook_endpoints WHERE secret_previous IS NOT NULL") != 0 {
		select {
		case <-deadline:
			t.Fatal("the janitor did not erase the expired previous secret")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
