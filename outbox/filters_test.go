package outbox_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/webhook"
)

// filtered adds an endpoint subscribed to events (none: every type) with
// the payload filter filter ("" none).
func filtered(t *testing.T, db *testdb.DB, name, filter string, events ...string) {
	t.Helper()
	newEndpoint(t, db, name, events...)
	if filter == "" {
		return
	}
	if _, err := db.Pool.Exec(context.Background(), "UPDATE webhook_endpoints SET payload_filter = $2 WHERE name = $1", name, filter); err != nil {
		t.Fatal(err)
	}
}

// takers claims until nothing is left and returns, by event row id, the
// endpoints each event was fanned out to, and the unrouted event types.
func takers(t *testing.T, c claimant) (map[int64][]string, []string) {
	t.Helper()
	got := map[int64][]string{}
	var unrouted []string
	for range 10 {
		b := claimQ(t, c, webhook.Query{})
		unrouted = append(unrouted, b.Unrouted...)
		for _, r := range b.Rows {
			ev := r.Event
			if ev == 0 { // a delivery row of its own (or the WEBHOOK_URL endpoint's event row)
				ev = r.ID
			}
			got[ev] = append(got[ev], takerName(r.EndpointName))
		}
		if b.Taken == 0 && len(b.Rows) == 0 {
			break
		}
	}
	for k := range got {
		slices.Sort(got[k])
	}
	return got, unrouted
}

func takerName(n string) string {
	if n == "" {
		return "env"
	}
	return n
}

// The claim fans an event out only to the endpoints whose payload filter
// finds something in it; an endpoint without a filter takes every event
// of its types, as before. A filter that errors on a payload (strict mode,
// a missing member) is no match: nothing stalls, the other endpoints get
// the event, and an event no endpoint takes is unrouted.
func TestPayloadFiltersDecideTheFanOut(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newClaimant(t, db, 100, 30*time.Second, false)
	filtered(t, db, "big", `$.amount ? (@ >= 100)`)
	filtered(t, db, "cust", `$.customer.id ? (@ == "c_42")`)
	filtered(t, db, "sku", `$.items[*] ? (@.sku == "X-1")`, "order.*")
	filtered(t, db, "rx", `$.email ? (@ like_regex "@example\\.com$" flag "i")`)
	filtered(t, db, "strict", `strict $.a.b ? (@ == 1)`)
	filtered(t, db, "all", "", "order.created")
	ids := db.Insert(t, "order.created",
		`{"amount": 150, "customer": {"id": "c_1"}, "items": [{"sku": "A"}, {"sku": "X-1"}], "email": "Ann@EXAMPLE.com"}`,
		`{"amount": 50, "customer": {"id": "c_42"}, "items": []}`)
	ids = append(ids, db.Insert(t, "misc",
		`{"a": {"b": 1}}`,
		`"{\"amount\": 500}"`, // JSON, a string holding JSON: no member to find
		`{"amount": "lots"}`,  // a string compared with a number: unknown, no match
		`[1, 2]`)...)
	// A payload that is not JSON never reaches a filter: the table refuses it.
	if _, err := db.Pool.Exec(context.Background(), "INSERT INTO webhook_outbox (event_type, payload) VALUES ('misc', $1)", `amount=500`); err == nil {
		t.Fatal("a payload that is not JSON was stored")
	}
	got, unrouted := takers(t, c)
	want := map[int64][]string{
		ids[0]: {"all", "big", "rx", "sku"},
		ids[1]: {"all", "cust"},
		ids[2]: {"strict"},
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("takers %v, want %v", got, want)
	}
	if slices.Sort(unrouted); !slices.Equal(unrouted, []string{"misc", "misc", "misc"}) {
		t.Fatalf("unrouted %v, want the three misc events no filter took", unrouted)
	}
	for _, id := range ids[3:] {
		if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE id = $1 AND processed AND fanout = 0", id); n != 1 {
			t.Fatalf("event %d not processed unrouted", id)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NULL AND lease_token IS NULL"); n != 0 {
		t.Fatalf("%d events left unclaimed", n)
	}
}

// With a WEBHOOK_URL endpoint, an event no filter takes is that endpoint's
// alone (the plain path stays open for it), and one a filter takes is
// fanned out to both.
func TestPayloadFiltersBesideTheWebhookURLEndpoint(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newClaimant(t, db, 100, 30*time.Second, true)
	filtered(t, db, "big", `$.amount ? (@ >= 100)`)
	small := db.Insert(t, "order.created", `{"amount": 5}`, `{"amount": 7}`)
	got, _ := takers(t, c)
	want := map[int64][]string{small[0]: {"env"}, small[1]: {"env"}}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("small events: takers %v, want %v", got, want)
	}
	large := db.Insert(t, "order.created", `{"amount": 500}`)
	got, _ = takers(t, c)
	if len(got) != 2 || !slices.Equal(got[large[0]], []string{"env"}) {
		t.Fatalf("large event: takers %v, want the WEBHOOK_URL endpoint's event row and big's row", got)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id WHERE e.name = 'big'"); n != 1 {
		t.Fatalf("big has %d deliveries, want 1", n)
	}
}

// webhook_takes is webhook_subscribed, then the filter; webhook_filter_problem
// refuses variables (an error no silent mode suppresses) and long filters,
// and the table's CHECK applies it to every row however written.
func TestWebhookTakes(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for _, tc := range []struct {
		types   []string
		filter  *string
		typ     string
		payload string
		want    bool
	}{
		{[]string{}, nil, "x", `{}`, true},
		{[]string{"y"}, filterPtr(`$`), "x", `{}`, false},
		{[]string{}, filterPtr(`$.amount ? (@ >= 100)`), "x", `{"amount": 100}`, true},
		{[]string{}, filterPtr(`$.amount ? (@ >= 100)`), "x", `{"amount": 99.5}`, false},
		{[]string{}, filterPtr(`strict $.a.b`), "x", `{}`, false},
		{[]string{}, filterPtr(`$.a ? (@ / 0 == 1)`), "x", `{"a": 1}`, false},
		{[]string{}, filterPtr(`$.at.datetime() < "2021-01-01 10:00:00+01".datetime()`), "x", `{"at": "2020-01-01"}`, true},
		{[]string{}, filterPtr(`$`), "fluxora.endpoint.failing", `{}`, false},
		{[]string{"fluxora.*"}, filterPtr(`$.endpoint ? (@ == "a")`), "fluxora.endpoint.failing", `{"endpoint": "a"}`, true},
	} {
		var got bool
		if err := db.Pool.QueryRow(ctx, "SELECT webhook_takes($1, $2::jsonpath, $3, $4::jsonb)", tc.types, tc.filter, tc.typ, tc.payload).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("webhook_takes(%q, %v, %q, %s) = %v, want %v", tc.types, filterText(tc.filter), tc.typ, tc.payload, got, tc.want)
		}
	}
	newEndpoint(t, db, "a")
	for _, bad := range []string{`$.a ? (@ == $x)`, `$ ? (@ == "` + strings.Repeat("a", 4100) + `")`} {
		if _, err := db.Pool.Exec(ctx, "UPDATE webhook_endpoints SET payload_filter = $1", bad); err == nil {
			t.Errorf("filter %.30q stored", bad)
		}
	}
	for _, ok := range []string{`$ ? (@ == "$x")`, `$."$x" ? (@ == 1)`} {
		if _, err := db.Pool.Exec(ctx, "UPDATE webhook_endpoints SET payload_filter = $1", ok); err != nil {
			t.Errorf("filter %q refused: %v", ok, err)
		}
	}
}

func filterPtr(s string) *string { return &s }

func filterText(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
