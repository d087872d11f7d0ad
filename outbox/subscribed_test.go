package outbox_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

// webhook_subscribed (migration 024) is the one rule of who takes an
// event: exact types, trailing-* patterns, and the every-type list that
// never takes the worker's own fluxora. types.
func TestSubscribedTruthTable(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, tc := range []struct {
		types []string
		typ   string
		want  bool
	}{
		{[]string{}, "invoice.paid", true},
		{[]string{}, "", true},
		{[]string{}, "fluxora.endpoint.disabled", false},
		{[]string{}, "fluxora", true},
		{[]string{}, "fluxoraX.y", true},
		{[]string{"invoice.paid"}, "invoice.paid", true},
		{[]string{"invoice.paid"}, "invoice.paid.late", false},
		{[]string{"invoice.paid"}, "", false},
		{[]string{"invoice.*"}, "invoice.paid", true},
		{[]string{"invoice.*"}, "invoice.", true},
		{[]string{"invoice.*"}, "invoice", false},
		{[]string{"invoice.*"}, "xinvoice.paid", false},
		{[]string{"invoice.*"}, "", false},
		{[]string{"a", "invoice.*", "b"}, "invoice.paid", true},
		{[]string{"a", "b"}, "c", false},
		{[]string{"inv*"}, "invoice.paid", true},
		{[]string{"a_*"}, "abc", false}, // no LIKE wildcards
		{[]string{"a_*"}, "a_c", true},
		{[]string{"a b*", "c"}, "a bc", true},
		{[]string{"*"}, "anything", true}, // stored by hand: as the empty list
		{[]string{"*"}, "", true},
		{[]string{"*"}, "fluxora.x", false},
		{[]string{"f*"}, "fluxora.x", false},
		{[]string{"fluxora*"}, "fluxora.x", false},
		{[]string{"fluxora*"}, "fluxoraX", true},
		{[]string{"fluxora.x"}, "fluxora.x", true},
		{[]string{"fluxora.*"}, "fluxora.x", true},
		{[]string{"fluxora.*"}, "invoice.paid", false},
		{[]string{"fluxora.endpoint.*"}, "fluxora.endpoint.disabled", true},
		{[]string{"fluxora.endpoint.*"}, "fluxora.worker.started", false},
		{[]string{"invoice.*", "fluxora.endpoint.*"}, "fluxora.endpoint.disabled", true},
	} {
		var got bool
		if err := db.Pool.QueryRow(context.Background(), "SELECT webhook_subscribed($1, $2)", tc.types, tc.typ).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("webhook_subscribed(%q, %q) = %v, want %v", tc.types, tc.typ, got, tc.want)
		}
	}
}

// An event reaches exactly the endpoints whose subscription matches it,
// through the claim's fan-out, with and without the WEBHOOK_URL endpoint;
// a fluxora. event reaches only the endpoints that name it, never an
// every-type endpoint nor the WEBHOOK_URL endpoint.
func TestClaimFansOutByPattern(t *testing.T) {
	t.Parallel()
	for _, env := range []bool{false, true} {
		db := testdb.New(t)
		newEndpoint(t, db, "every")
		newEndpoint(t, db, "invoices", "invoice.*")
		newEndpoint(t, db, "paid", "invoice.paid")
		newEndpoint(t, db, "ops", "fluxora.*")
		newEndpoint(t, db, "disabled", "fluxora.endpoint.*")
		newEndpoint(t, db, "customers", "customer.created")
		c := newClaimant(t, db, 100, 30*time.Second, env)
		want := map[string]string{
			"invoice.paid":              "every invoices paid",
			"invoice":                   "every",
			"invoice.voided":            "every invoices",
			"customer.created":          "customers every",
			"fluxora.endpoint.disabled": "disabled ops",
			"fluxora.worker.started":    "ops",
		}
		for typ, eps := range want {
			db.Insert(t, typ, `{}`)
			if env && !strings.HasPrefix(typ, webhook.OperatorTypes) {
				names := strings.Fields("default " + eps)
				slices.Sort(names)
				want[typ] = strings.Join(names, " ")
			}
		}
		got := receivers(t, db, c)
		for typ, eps := range want {
			if got[typ] != eps {
				t.Errorf("env %v: %s went to %q, want %q", env, typ, got[typ], eps)
			}
		}
	}
}

// With the WEBHOOK_URL endpoint and an every-type endpoint, a fluxora.
// event goes to neither: it is unrouted (processed, fanout 0), on the
// plain path as through the steps.
func TestOperatorEventsAreUnroutedBesideTheURLEndpoint(t *testing.T) {
	t.Parallel()
	for _, every := range []bool{false, true} {
		db := testdb.New(t)
		if every {
			newEndpoint(t, db, "every")
		}
		c := newClaimant(t, db, 10, 30*time.Second, true)
		db.Insert(t, "fluxora.endpoint.disabled", `{}`)
		db.Insert(t, "invoice.paid", `{}`)
		for range 3 {
			b := claimQ(t, c, webhook.Query{})
			for _, r := range b.Rows {
				if strings.HasPrefix(r.EventType, webhook.OperatorTypes) {
					t.Fatalf("every %v: %s delivered to %q", every, r.EventType, r.EndpointName)
				}
			}
			if slices.Contains(b.Unrouted, "fluxora.endpoint.disabled") {
				break
			}
		}
		var processed bool
		var fanout *int
		if err := db.Pool.QueryRow(context.Background(), `SELECT processed, fanout FROM webhook_outbox
			WHERE event_type = 'fluxora.endpoint.disabled' AND endpoint_id IS NULL`).Scan(&processed, &fanout); err != nil {
			t.Fatal(err)
		}
		if !processed || fanout == nil || *fanout != 0 {
			t.Errorf("every %v: the fluxora. event: processed %v, fanout %v; want unrouted (processed, fanout 0)", every, processed, fanout)
		}
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type LIKE 'fluxora.%' AND endpoint_id IS NOT NULL"); n != 0 {
			t.Errorf("every %v: %d deliveries of the fluxora. event", every, n)
		}
	}
}

// receivers claims until nothing is left and returns, for each event type,
// the names of the endpoints it was delivered to, sorted: as rows leased by
// the claim, or written pending; "default" for the WEBHOOK_URL endpoint.
func receivers(t *testing.T, db *testdb.DB, c claimant) map[string]string {
	t.Helper()
	got := map[string][]string{}
	for range 10 {
		b := claimQ(t, c, webhook.Query{})
		for _, r := range b.Rows {
			got[r.EventType] = append(got[r.EventType], cmpName(r.EndpointName))
		}
		if len(b.Rows) == 0 && !b.More {
			break
		}
	}
	rows, err := db.Pool.Query(context.Background(), `SELECT o.event_type, e.name FROM webhook_outbox o
		JOIN webhook_endpoints e ON e.id = o.endpoint_id WHERE o.lease_token IS NULL AND NOT o.processed`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, name string
		if err := rows.Scan(&typ, &name); err != nil {
			t.Fatal(err)
		}
		got[typ] = append(got[typ], name)
	}
	out := map[string]string{}
	for typ, names := range got {
		slices.Sort(names)
		out[typ] = strings.Join(names, " ")
	}
	return out
}

func cmpName(n string) string {
	if n == "" {
		return "default"
	}
	return n
}
