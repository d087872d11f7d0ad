package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/console"
)

// The overview shows the queue and every endpoint with its last hour:
// shop made two attempts, one delivered (50%).
func TestOverview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	res, body := do(t, c, "GET", b.url+"/api/overview", nil, bearer...)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/overview: %d %s", res.StatusCode, body)
	}
	var o struct {
		Queue     map[string]any
		Endpoints []map[string]any
	}
	if err := json.Unmarshal([]byte(body), &o); err != nil {
		t.Fatal(err)
	}
	if o.Queue["dead_letters"] != 3.0 {
		t.Fatalf("queue %v: want 3 dead letters", o.Queue)
	}
	shop := o.Endpoints[1]
	if shop["name"] != "shop" || shop["attempts_last_hour"] != 2.0 || shop["success_rate"] != 0.5 || shop["p50_ms"] != 100.0 {
		t.Fatalf("shop %v: want 2 attempts, 0.5, p50 100", shop)
	}
	res, body = do(t, c, "GET", b.url+"/", nil, bearer...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-endpoint="shop"`) || !strings.Contains(body, "50.0%") ||
		!strings.Contains(body, "http 410") {
		t.Fatalf("overview page: %d %s", res.StatusCode, body)
	}
	// Values are escaped: a reason holding markup shows as text.
	b.exec(t, `UPDATE webhook_endpoints SET disabled_reason = '<script>alert(1)</script>' WHERE name = 'off'`)
	if _, body = do(t, c, "GET", b.url+"/", nil, bearer...); strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)") {
		t.Fatalf("a reason with markup is not escaped: %s", body)
	}
}

// A search by the event id finds its delivery to shop, attempts,
// payload preview and the request of the last attempt, signatures
// masked; by a delivery id the same; an unknown id nothing; a malformed
// one is a 400.
func TestDeliverySearch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	d := searchDelivery(t, b, c, event)
	if len(d.Attempts) != 2 || d.Attempts[1].Status != 200 || len(d.Row.PayloadPreview) != 2048 {
		t.Fatalf("delivery %+v: want 2 attempts, the last 200, a preview of 2048", d)
	}
	if len(d.Requests) != 1 || d.Requests[0].DeliveryID != d.Attempts[1].DeliveryID || d.Requests[0].Attempt != 2 || d.Requests[0].Endpoint != "shop" {
		t.Fatalf("requests %+v: want the one of attempt 2 of the delivery to shop", d.Requests)
	}
	h := map[string]string{}
	for _, kv := range d.Requests[0].Headers {
		h[kv[0]] = kv[1]
	}
	if h["Webhook-Signature"] != "••••••••" || h["traceparent"] != "00-abc-01" || h["X-Fluxora-Event"] != "order.created" ||
		h["X-Fluxora-Attempt"] != "2" || h["X-Fluxora-Delivery-Id"] != d.Attempts[1].DeliveryID {
		t.Fatalf("headers %v: want the request's, the signature masked and the event's traceparent", d.Requests[0].Headers)
	}
	res, body := do(t, c, "GET", b.url+"/deliveries?id="+d.Attempts[0].DeliveryID, nil, bearer...)
	if res.StatusCode != http.StatusOK || strings.Count(body, "<tr><td>"+d.Attempts[0].DeliveryID) != 2 {
		t.Fatalf("by delivery id: %d %s", res.StatusCode, body)
	}
	if res, _ := do(t, c, "GET", b.url+"/api/deliveries/00000000-0000-4000-8000-000000000000", nil, bearer...); res.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown id: %d, want 404", res.StatusCode)
	}
	if res, _ := do(t, c, "GET", b.url+"/api/deliveries/nope", nil, bearer...); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("not a uuid: %d, want 400", res.StatusCode)
	}
}

// A keyed event's delivery carries the key, shown (not a credential), and
// the sequence of its own row, found by the event's id too.
func TestDeliverySearchOrdering(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `UPDATE webhook_outbox SET ordering_key = 'order-42' WHERE delivery_id = $1`, event)
	b.exec(t, `INSERT INTO webhook_outbox (delivery_id, event_type, payload, endpoint_id, ordering_key, ordering_seq, processed, processed_at)
		VALUES (md5($1::uuid::text || '/' || $2)::uuid, 'order.created', '{}', $2::uuid, 'order-42', 5, true, now() - interval '20 seconds')`, event, b.ids["shop"])
	c := client(t)
	for _, id := range []string{event, searchDelivery(t, b, c, event).Attempts[0].DeliveryID} {
		d := searchDelivery(t, b, c, id)
		if len(d.Requests) != 1 {
			t.Fatalf("search %s: requests %+v, want one", id, d.Requests)
		}
		h := map[string]string{}
		for _, kv := range d.Requests[0].Headers {
			h[kv[0]] = kv[1]
		}
		if h["Webhook-Ordering-Key"] != "order-42" || h["Webhook-Sequence"] != "5" {
			t.Fatalf("search %s: headers %v, want the key and the delivery's sequence 5", id, d.Requests[0].Headers)
		}
	}
}

// searchedDelivery is what GET /api/deliveries/ID answers.
type searchedDelivery struct {
	Row struct {
		PayloadPreview string `json:"payload_preview"`
	}
	Requests []struct {
		DeliveryID string `json:"delivery_id"`
		Endpoint   string
		Attempt    int
		Headers    [][2]string
	}
	Attempts []struct {
		DeliveryID string `json:"delivery_id"`
		Status     int
	}
}

func searchDelivery(t *testing.T, b bundle, c *http.Client, id string) searchedDelivery {
	t.Helper()
	res, body := do(t, c, "GET", b.url+"/api/deliveries/"+id, nil, bearer...)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/deliveries/%s: %d %s", id, res.StatusCode, body)
	}
	var d searchedDelivery
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// The endpoint page shows its attempts and dead letters; an unknown
// endpoint is a 404.
func TestEndpointPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	res, body := do(t, c, "GET", b.url+"/endpoints/shop", nil, bearer...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, deadShop2) || !strings.Contains(body, "http 503") {
		t.Fatalf("shop's page: %d %s", res.StatusCode, body)
	}
	if res, _ := do(t, c, "GET", b.url+"/api/endpoints/nobody", nil, bearer...); res.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown endpoint: %d, want 404", res.StatusCode)
	}
}

// Dead letters filter by endpoint and time; an endpoint's replay takes a
// time range; purge needs the typed word.
func TestDeadLetterActions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	res, body := do(t, c, "GET", b.url+"/api/dead-letters?endpoint=shop&since=2000-01-01T00:00", nil, bearer...)
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil || res.StatusCode != http.StatusOK || len(list) != 2 {
		t.Fatalf("shop's dead letters: %d %s", res.StatusCode, body)
	}
	if res, _ := do(t, c, "GET", b.url+"/api/dead-letters?since=yesterday", nil, bearer...); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad since: %d, want 400", res.StatusCode)
	}
	// shop's dead letters of the last hour only: deadShop2.
	res, body = do(t, c, "POST", b.url+"/api/endpoints/shop/replay", url.Values{"since": {timeAgo(b, t, "1 hour")}}, bearer...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"replayed":1`) {
		t.Fatalf("replay of the last hour: %d %s", res.StatusCode, body)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND delivery_id = $1", deadShop2); n != 1 {
		t.Fatal("deadShop2 not back in the outbox")
	}
	// off is disabled: its dead letter stays, and the answer says so.
	res, body = do(t, c, "POST", b.url+"/api/dead-letters/replay", url.Values{"all": {"1"}, "endpoint": {"off"}}, bearer...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"replayed":0`) || !strings.Contains(body, `"Count":1`) {
		t.Fatalf("replay of a disabled endpoint's: %d %s", res.StatusCode, body)
	}
	if res, _ := do(t, c, "POST", b.url+"/api/dead-letters/replay", url.Values{}, bearer...); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a replay of nothing chosen: %d, want 400", res.StatusCode)
	}
	purge := url.Values{"before": {"2100-01-01"}, "endpoint": {"off"}}
	if res, _ := do(t, c, "POST", b.url+"/api/dead-letters/purge", purge, bearer...); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("purge without confirm: %d, want 400", res.StatusCode)
	}
	purge.Set("confirm", "purge")
	if res, body := do(t, c, "POST", b.url+"/api/dead-letters/purge", purge, bearer...); res.StatusCode != http.StatusOK || !strings.Contains(body, `"deleted":1`) {
		t.Fatalf("purge: %d %s", res.StatusCode, body)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_dead_letter"); n != 1 {
		t.Fatalf("%d dead letters left, want 1 (deadShop1)", n)
	}
}

// Rotating shows the new secret once; disable dead-letters nothing here
// and records the reason.
func TestEndpointActions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	res, body := do(t, c, "POST", b.url+"/api/endpoints/shop/rotate-secret", url.Values{"grace_hours": {"0"}}, bearer...)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `"secret":"whsec_`) {
		t.Fatalf("rotate: %d %s", res.StatusCode, body)
	}
	if res, _ := do(t, c, "POST", b.url+"/api/endpoints/shop/rotate-secret", url.Values{"grace_hours": {"9999"}}, bearer...); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a grace of 9999 h: %d, want 400", res.StatusCode)
	}
	res, body = do(t, c, "POST", b.url+"/api/endpoints/shop/disable", url.Values{"reason": {"customer asked"}}, bearer...)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("disable: %d %s", res.StatusCode, body)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'shop' AND NOT enabled AND disabled_reason = 'customer asked'"); n != 1 {
		t.Fatal("shop not disabled with its reason")
	}
	if res, _ := do(t, c, "POST", b.url+"/api/endpoints/nobody/enable", url.Values{}, bearer...); res.StatusCode != http.StatusNotFound {
		t.Fatalf("enable an unknown endpoint: %d, want 404", res.StatusCode)
	}
}

// timeAgo is the database's now() minus the interval, RFC 3339.
func timeAgo(b bundle, t *testing.T, interval string) string {
	t.Helper()
	var s string
	if err := b.db.Pool.QueryRow(t.Context(), `SELECT to_char((now() - $1::interval) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`, interval).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// breakers is the gates' breaker state as the test sets it, by URL.
type breakers map[string]console.Breaker

func (b breakers) Breakers(_ context.Context, urls []string) (map[string]console.Breaker, error) {
	out := map[string]console.Breaker{}
	for _, u := range urls {
		if s, ok := b[u]; ok {
			out[u] = s
		} else {
			out[u] = console.Breaker{State: "closed"}
		}
	}
	return out, nil
}

// With REDIS_URL the overview and the endpoint page show a breaker that is
// open, and until when; a closed one adds nothing.
func TestOverviewShowsOpenBreakers(t *testing.T) {
	t.Parallel()
	until := time.Date(2031, 5, 4, 3, 2, 1, 0, time.UTC)
	b := setupWith(t, breakers{"https://hooks.example.com/shop?key=sekrit": {State: "open", OpenUntil: &until}})
	c := client(t)
	for _, page := range []string{"/", "/endpoints/shop"} {
		res, body := do(t, c, "GET", b.url+page, nil, bearer...)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, "breaker open until 2031-05-04 03:02:01Z") {
			t.Fatalf("%s: %d, no open breaker in:\n%s", page, res.StatusCode, body)
		}
		if strings.Count(body, "breaker open") != 1 {
			t.Fatalf("%s: a closed breaker shown too", page)
		}
	}
	_, body := do(t, c, "GET", b.url+"/api/endpoints", nil, bearer...)
	if !strings.Contains(body, `"breaker":{"state":"open","open_until":"2031-05-04T03:02:01Z"}`) {
		t.Fatalf("/api/endpoints: %s", body)
	}
}

// An endpoint's flow control and its consumer's pause show on the
// overview, its page and the API.
func TestOverviewShowsFlowControl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE webhook_endpoints
		SET rate_limit = 50, rate_period_s = 1, rate_burst = 10, max_in_flight = 4 WHERE name = 'shop'`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(context.Background(), `INSERT INTO webhook_flow (endpoint_id, paused_until)
		SELECT id, '2031-05-04 03:02:01+00' FROM webhook_endpoints WHERE name = 'shop'`); err != nil {
		t.Fatal(err)
	}
	c := client(t)
	for _, page := range []string{"/", "/endpoints/shop"} {
		res, body := do(t, c, "GET", b.url+page, nil, bearer...)
		for _, want := range []string{"paused by its consumer until 2031-05-04 03:02:01Z", "rate 50/s+10", "at most 4 in flight"} {
			if res.StatusCode != http.StatusOK || !strings.Contains(body, want) {
				t.Fatalf("%s: %d, no %q in:\n%s", page, res.StatusCode, want, body)
			}
		}
		if strings.Count(body, "paused by its consumer") != 1 {
			t.Fatalf("%s: another endpoint shown paused", page)
		}
	}
	_, body := do(t, c, "GET", b.url+"/api/endpoints", nil, bearer...)
	if !strings.Contains(body, `"flow":{"rate":"50/s+10","max_in_flight":4,"paused_until":"2031-05-04T03:02:01Z"}`) {
		t.Fatalf("/api/endpoints: %s", body)
	}
}
