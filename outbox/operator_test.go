package outbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

// operatorEvents returns the payloads of the operator events of type typ
// written so far (webhook_outbox, endpoint_id NULL), oldest first.
func operatorEvents(t *testing.T, db *testdb.DB, typ string) []map[string]any {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT payload FROM webhook_outbox
		WHERE endpoint_id IS NULL AND event_type = $1 ORDER BY id`, typ)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (map[string]any, error) {
		var m map[string]any
		err := r.Scan(&m)
		return m, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// attemptOn claims until it holds a delivery of typ to the endpoint
// named name and records its outcome of kind k with health h.
func attemptOn(t *testing.T, c claimant, typ, name string, k webhook.Kind, h webhook.Health) webhook.Delivery {
	t.Helper()
	for range 20 {
		for _, r := range claim(t, c, 100) {
			if r.EventType == typ && r.EndpointName == name {
				o := outcome(r, k)
				o.Health, o.Attempt, o.Status, o.Error = h, 2, 503, "http 503"
				if h == webhook.Healthy {
					o.Status, o.Error = 200, ""
				}
				if !write(t, c, o)[0] {
					t.Fatalf("outcome of %s to %s not written", typ, name)
				}
				return r
			}
		}
	}
	t.Fatalf("no delivery of %s to %s claimed", typ, name)
	return webhook.Delivery{}
}

func operatorSetup(t *testing.T) (claimant, *testdb.DB, string) {
	t.Helper()
	db := testdb.New(t)
	c := newClaimant(t, db, 100, 30*time.Second, false)
	c.SetConsoleURL("https://console.example.com")
	id := newEndpoint(t, db, "shop", "order.*")
	newEndpoint(t, db, "ops", "fluxora.endpoint.*", "fluxora.delivery.exhausted")
	return c, db, id
}

// The record writes fluxora.endpoint.failing on the first failure after a
// healthy stretch (at most once an hour), fluxora.endpoint.recovered on
// the success that ends the run, and fluxora.delivery.exhausted for a
// dead letter, each once, with the documented fields and no payload.
func TestRecordWritesOperatorEvents(t *testing.T) {
	t.Parallel()
	c, db, _ := operatorSetup(t)
	db.Insert(t, "order.paid", `{"card":"4242-secret"}`)
	attemptOn(t, c, "order.paid", "shop", webhook.Retry, webhook.Failing)
	failing := operatorEvents(t, db, "fluxora.endpoint.failing")
	if len(failing) != 1 {
		t.Fatalf("failing events: %v", failing)
	}
	f := failing[0]
	if f["endpoint"] != "shop" || f["last_error"] != "http 503" || f["last_status"] != float64(503) ||
		f["console_url"] != "https://console.example.com" || !strings.HasSuffix(f["failing_since"].(string), "Z") ||
		!strings.HasSuffix(f["occurred_at"].(string), "Z") {
		t.Errorf("failing payload: %v", f)
	}
	// The retry fails again: the run goes on, no second event.
	db.Pool.Exec(context.Background(), "UPDATE webhook_outbox SET created_at = now() WHERE NOT processed")
	attemptOn(t, c, "order.paid", "shop", webhook.Retry, webhook.Failing)
	if n := len(operatorEvents(t, db, "fluxora.endpoint.failing")); n != 1 {
		t.Errorf("%d failing events after a second failure, want 1", n)
	}
	// A success ends the run.
	db.Pool.Exec(context.Background(), "UPDATE webhook_outbox SET created_at = now() WHERE NOT processed")
	attemptOn(t, c, "order.paid", "shop", webhook.Done, webhook.Healthy)
	rec := operatorEvents(t, db, "fluxora.endpoint.recovered")
	if len(rec) != 1 || rec[0]["endpoint"] != "shop" || rec[0]["last_error"] != "http 503" {
		t.Fatalf("recovered events: %v", rec)
	}
	// A new run within the hour: no failing event; an hour later, one.
	db.Insert(t, "order.paid", `{}`)
	attemptOn(t, c, "order.paid", "shop", webhook.Dead, webhook.Failing)
	if n := len(operatorEvents(t, db, "fluxora.endpoint.failing")); n != 1 {
		t.Errorf("%d failing events within the hour, want 1", n)
	}
	ex := operatorEvents(t, db, "fluxora.delivery.exhausted")
	if len(ex) != 1 || ex[0]["event_type"] != "order.paid" || ex[0]["attempts"] != float64(2) || ex[0]["delivery_id"] == nil {
		t.Fatalf("exhausted events: %v", ex)
	}
	if _, err := db.Pool.Exec(context.Background(), `UPDATE webhook_endpoints
		SET failing_since = NULL, failing_noted_at = failing_noted_at - interval '61 minutes'`); err != nil {
		t.Fatal(err)
	}
	db.Insert(t, "order.paid", `{}`)
	attemptOn(t, c, "order.paid", "shop", webhook.Retry, webhook.Failing)
	if n := len(operatorEvents(t, db, "fluxora.endpoint.failing")); n != 2 {
		t.Errorf("%d failing events an hour later, want 2", n)
	}
	all, _ := json.Marshal([]any{operatorEvents(t, db, "fluxora.endpoint.failing"), ex, rec})
	if strings.Contains(string(all), "4242") || strings.Contains(string(all), "whsec_") {
		t.Errorf("an operator event carries a payload or a secret: %s", all)
	}
}

// Without an endpoint subscribed, nothing is written; an endpoint that
// subscribes to operator events causes none about itself, and a dead
// letter of an operator event causes no exhausted event.
func TestOperatorEventsNeedASubscriberAndNeverLoop(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newClaimant(t, db, 100, 30*time.Second, false)
	newEndpoint(t, db, "shop", "order.*")
	newEndpoint(t, db, "every")
	newEndpoint(t, db, "off", "fluxora.*")
	if _, err := db.Pool.Exec(context.Background(), "UPDATE webhook_endpoints SET enabled = false WHERE name = 'off'"); err != nil {
		t.Fatal(err)
	}
	db.Insert(t, "order.paid", `{}`)
	attemptOn(t, c, "order.paid", "shop", webhook.Dead, webhook.Failing)
	if _, err := c.DisableEndpointByName(context.Background(), "shop", "by an operator"); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type LIKE 'fluxora.%'"); n != 0 {
		t.Fatalf("%d operator events without an enabled subscriber", n)
	}

	ops := newEndpoint(t, db, "ops", "fluxora.*")
	db.Insert(t, "fluxora.endpoint.disabled", `{}`)
	attemptOn(t, c, "fluxora.endpoint.disabled", "ops", webhook.Dead, webhook.Failing)
	if _, err := c.DisableEndpoint(context.Background(), ops, "gone"); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type LIKE 'fluxora.%' AND endpoint_id IS NULL"); n != 1 {
		t.Errorf("%d operator events (the one inserted, want none other) about the operator endpoint itself", n)
	}
}

// Disabling and enabling write their events once, in their transaction:
// a second disable or enable writes none, a rolled-back one none.
func TestDisableAndEnableWriteOperatorEvents(t *testing.T) {
	t.Parallel()
	c, db, id := operatorSetup(t)
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT webhook_endpoint_disable($1, 'rolled back')", id); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(operatorEvents(t, db, "fluxora.endpoint.disabled")); n != 0 {
		t.Fatalf("%d disabled events after a rollback", n)
	}
	for range 2 {
		if _, err := c.DisableEndpoint(ctx, id, "endpoint answered 410 Gone"); err != nil {
			t.Fatal(err)
		}
	}
	d := operatorEvents(t, db, "fluxora.endpoint.disabled")
	if len(d) != 1 || d[0]["endpoint"] != "shop" || d[0]["reason"] != "endpoint answered 410 Gone" || d[0]["moved"] != float64(0) ||
		d[0]["console_url"] != "https://console.example.com" {
		t.Fatalf("disabled events: %v", d)
	}
	for range 2 {
		if _, err := c.EnableEndpoint(ctx, "shop"); err != nil {
			t.Fatal(err)
		}
	}
	e := operatorEvents(t, db, "fluxora.endpoint.enabled")
	if len(e) != 1 || e[0]["endpoint"] != "shop" {
		t.Fatalf("enabled events: %v", e)
	}
}

// A client certificate within 14 days of its end: one event a day.
func TestExpiringCertificateOnceADay(t *testing.T) {
	t.Parallel()
	c, db, id := operatorSetup(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `UPDATE webhook_endpoints SET client_cert = 'pem', client_key = 'fxsealed:x',
		client_cert_not_after = now() + interval '10 days' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{1, 0} {
		if n, err := c.NoteExpiringCertificates(ctx); err != nil || n != want {
			t.Fatalf("pass %d: %d written, %v; want %d", i, n, err, want)
		}
	}
	db.Pool.Exec(ctx, "UPDATE webhook_endpoints SET certificate_noted_at = certificate_noted_at - interval '25 hours'")
	if n, err := c.NoteExpiringCertificates(ctx); err != nil || n != 1 {
		t.Fatalf("a day later: %d written, %v; want 1", n, err)
	}
	ev := operatorEvents(t, db, "fluxora.endpoint.certificate_expiring")
	if len(ev) != 2 || ev[0]["endpoint"] != "shop" || !strings.HasSuffix(ev[0]["not_after"].(string), "Z") {
		t.Fatalf("certificate events: %v", ev)
	}
}
