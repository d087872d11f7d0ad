package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// addEndpoint inserts an endpoint with plain SQL, as an operator's script
// would, and returns its id.
func addEndpoint(t *testing.T, db *testdb.DB, name string, c *consumer, events ...string) string {
	t.Helper()
	if events == nil {
		events = []string{}
	}
	c.secret = "whsec_" + name + "_secret"
	var id string
	err := db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret, event_types)
		VALUES ($1, $2, $3, $4) RETURNING id::text`, name, c.srv.URL, c.secret, events).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// endpointsOnly is a configuration without a WEBHOOK_URL endpoint.
func endpointsOnly(db *testdb.DB, overrides map[string]string) map[string]string {
	env := baseEnv(db, nil, overrides)
	delete(env, "WEBHOOK_URL")
	delete(env, "WEBHOOK_SECRET")
	return env
}

func enqueue(t *testing.T, db *testdb.DB, eventType, payload, endpoint string) string {
	t.Helper()
	var id string
	var ep any
	if endpoint != "" {
		ep = endpoint
	}
	if err := db.Pool.QueryRow(context.Background(), "SELECT webhook_enqueue($1, $2::jsonb, $3)::text", eventType, payload, ep).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// byEvent counts c's requests per event type.
func byEvent(c *consumer) map[string]int {
	out := map[string]int{}
	for _, d := range c.deliveries() {
		out[d.Event]++
	}
	return out
}

// Each event reaches every enabled endpoint subscribed to its type, once,
// signed with that endpoint's secret, named in x-fluxora-endpoint, under a
// delivery id of its own that stays the same across retries.
func TestFanOutToSubscribedEndpoints(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var failOnce sync.Map
	orders := newConsumer(t, nil)
	all := newConsumer(t, func(d delivery) int {
		if _, seen := failOnce.LoadOrStore(d.ID, true); !seen {
			return http.StatusServiceUnavailable // each delivery's first attempt
		}
		return http.StatusOK
	})
	users := newConsumer(t, nil)
	off := newConsumer(t, nil)
	addEndpoint(t, db, "orders", orders, "order.created", "order.paid")
	addEndpoint(t, db, "all", all)
	addEndpoint(t, db, "users", users, "user.created")
	addEndpoint(t, db, "off", off)
	if _, err := db.Pool.Exec(context.Background(), "UPDATE webhook_endpoints SET enabled = false, disabled_reason = 'test' WHERE name = 'off'"); err != nil {
		t.Fatal(err)
	}
	startInProcess(t, endpointsOnly(db, nil))

	var ids []string
	for _, typ := range []string{"order.created", "order.paid", "order.created", "invoice.sent"} {
		ids = append(ids, enqueue(t, db, typ, `{"k":1}`, ""))
	}
	waitfor.True(t, 20*time.Second, "every subscribed delivery made", func() bool {
		return len(orders.deliveries()) == 3 && len(all.byID()) == 4 && len(all.deliveries()) == 8
	})
	// Give a wrong extra delivery a chance to show before counting.
	waitfor.True(t, 20*time.Second, "all rows processed", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	if got := byEvent(orders); got["order.created"] != 2 || got["order.paid"] != 1 || len(got) != 2 {
		t.Fatalf("orders endpoint got %v", got)
	}
	if n := len(users.deliveries()) + len(off.deliveries()); n != 0 {
		t.Fatalf("unsubscribed or disabled endpoints got %d requests", n)
	}
	seen := map[string]string{}
	for name, c := range map[string]*consumer{"orders": orders, "all": all} {
		for _, d := range c.deliveries() {
			if !d.SignatureOK {
				t.Fatalf("%s: bad signature with the endpoint's own secret: %+v", name, d)
			}
			if d.Endpoint != name {
				t.Fatalf("%s: x-fluxora-endpoint %q", name, d.Endpoint)
			}
			for _, id := range ids {
				if d.ID == id {
					t.Fatalf("%s: endpoint delivery reused the event's delivery id %s", name, id)
				}
			}
			if other, ok := seen[d.ID]; ok && other != name {
				t.Fatalf("delivery id %s used by %s and %s", d.ID, other, name)
			}
			seen[d.ID] = name
		}
	}
	// The "all" endpoint failed each first attempt: the retry kept the id.
	for id, n := range all.byID() {
		if n != 2 {
			t.Fatalf("delivery %s to the failing endpoint: %d requests, want 2 (one retry, same id)", id, n)
		}
	}
	for _, d := range all.deliveries() {
		if d.Attempt != 1 && d.Attempt != 2 {
			t.Fatalf("attempt %d", d.Attempt)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id IS NULL AND fanout IS NULL"); n != 0 {
		t.Fatalf("%d events not fanned out", n)
	}
}

// An event enqueued for one endpoint goes to it alone: not to the other
// endpoints subscribed to its type, not to the WEBHOOK_URL endpoint.
func TestTargetedDelivery(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	env := newConsumer(t, nil)
	tenant := newConsumer(t, nil)
	other := newConsumer(t, nil)
	addEndpoint(t, db, "tenant-42", tenant)
	addEndpoint(t, db, "other", other)
	startInProcess(t, baseEnv(db, env, nil))

	targeted := enqueue(t, db, "stream.updated", `{"n":1}`, "tenant-42")
	broadcast := enqueue(t, db, "stream.updated", `{"n":2}`, "")
	waitfor.True(t, 20*time.Second, "deliveries made", func() bool {
		return len(tenant.deliveries()) == 2 && len(other.deliveries()) == 1 && len(env.deliveries()) == 1
	})
	waitfor.True(t, 20*time.Second, "all rows processed", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	// The WEBHOOK_URL endpoint keeps the outbox row's delivery id, and its
	// requests are named "default".
	if d := env.deliveries(); len(d) != 1 || d[0].ID != broadcast || d[0].Endpoint != "default" || !d[0].SignatureOK {
		t.Fatalf("env endpoint got %+v, want only %s", d, broadcast)
	}
	var gotTargeted bool
	for _, d := range tenant.deliveries() {
		gotTargeted = gotTargeted || d.ID == targeted
	}
	if !gotTargeted || len(other.deliveries()) != 1 || other.deliveries()[0].ID == targeted {
		t.Fatalf("targeted delivery %s: tenant %+v, other %+v", targeted, tenant.deliveries(), other.deliveries())
	}
	if _, err := db.Pool.Exec(context.Background(), "SELECT webhook_enqueue('e', '{}', 'nope')"); err == nil || !strings.Contains(err.Error(), `no endpoint named "nope"`) {
		t.Fatalf("unknown endpoint: %v", err)
	}
}

// With no WEBHOOK_URL and no endpoint subscribed, an event is recorded as
// unrouted: counted, shown by status, and never delivered or lost from view.
func TestUnroutedEvents(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	addEndpoint(t, db, "orders", c, "order.created")
	w := startInProcess(t, endpointsOnly(db, nil))
	base := startedWorker(t, w.logs)
	enqueue(t, db, "user.created", `{}`, "")
	enqueue(t, db, "user.deleted", `{}`, "")
	waitfor.True(t, 20*time.Second, "events recorded unrouted", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed AND endpoint_id IS NULL AND fanout = 0") == 2
	})
	// The claim commits the mark before the worker counts it: the count
	// follows at once.
	waitfor.True(t, 10*time.Second, "both counted unrouted (fluxora_webhook_events_unrouted_total 2)", func() bool {
		_, metrics := httpGet(base + "/metrics")
		return strings.Contains(metrics, "fluxora_webhook_events_unrouted_total 2")
	})
	code, out, errs := ops(t, db, "status")
	if code != 0 || !strings.Contains(out, "unrouted (last hour)") || !strings.Contains(lineOf(out, "unrouted"), "2") {
		t.Fatalf("status exit %d: %s%s", code, out, errs)
	}
	if len(c.deliveries()) != 0 {
		t.Fatalf("unsubscribed endpoint got %d requests", len(c.deliveries()))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func lineOf(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
