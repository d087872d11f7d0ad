package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/webhook"
)

// The headers of the events of these tests, as the producer gave them.
const (
	testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testCorrelation = "corr-42 é/ü;q=1"
	testHeadersJSON = `{"traceparent": "` + testTraceparent + `", "X-Correlation-Id": "` + testCorrelation + `"}`
)

// seenRequest is one request a headerConsumer received.
type seenRequest struct {
	ID, Endpoint string
	Attempt      string
	Header       http.Header
}

// headerConsumer is a consumer that also keeps every request's headers.
type headerConsumer struct {
	*consumer
	mu   sync.Mutex
	seen []seenRequest
}

func newHeaderConsumer(t *testing.T, respond func(d delivery) int) *headerConsumer {
	t.Helper()
	h := &headerConsumer{consumer: &consumer{respond: respond, arrived: make(chan delivery, 1000), secret: testSecret}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, seenRequest{ID: r.Header.Get("X-Fluxora-Delivery-Id"), Endpoint: r.Header.Get("X-Fluxora-Endpoint"),
			Attempt: r.Header.Get("X-Fluxora-Attempt"), Header: r.Header.Clone()})
		h.mu.Unlock()
		h.serve(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *headerConsumer) requests() []seenRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]seenRequest(nil), h.seen...)
}

// checkHeaders fails the test unless r carries the test's headers exactly
// once each, unchanged, next to the worker's own.
func checkHeaders(t *testing.T, name string, r seenRequest) {
	t.Helper()
	tp, corr := r.Header.Values("Traceparent"), r.Header.Values("X-Correlation-Id")
	if len(tp) != 1 || tp[0] != testTraceparent || len(corr) != 1 || corr[0] != testCorrelation {
		t.Fatalf("%s: delivery %s attempt %s: traceparent %q, x-correlation-id %q", name, r.ID, r.Attempt, tp, corr)
	}
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Webhook-Id") != r.ID {
		t.Fatalf("%s: the worker's headers changed: %v", name, r.Header)
	}
}

// enqueueWithHeaders enqueues through webhook_enqueue with the test's
// headers.
func enqueueWithHeaders(t *testing.T, db *testdb.DB, eventType string) string {
	t.Helper()
	var id string
	err := db.Pool.QueryRow(context.Background(), "SELECT webhook_enqueue($1, '{\"k\": 1}', NULL, $2::jsonb)::text", eventType, testHeadersJSON).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// failFirst answers 503 to each delivery's first attempt, 200 after.
func failFirst() func(d delivery) int {
	var seen sync.Map
	return func(d delivery) int {
		if _, again := seen.LoadOrStore(d.ID, true); !again {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
}

// An event's headers arrive unchanged on the first attempt and on the retry
// of each of its deliveries: to the WEBHOOK_URL endpoint (the event's own
// row) and to each of two table endpoints (the fan-out's rows). An event
// without headers gets none.
func TestEventHeadersOnRetriesAndFanOut(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	env := newHeaderConsumer(t, failFirst())
	a := newHeaderConsumer(t, failFirst())
	b := newHeaderConsumer(t, failFirst())
	addEndpoint(t, db, "a", a.consumer)
	addEndpoint(t, db, "b", b.consumer)
	startInProcess(t, baseEnv(db, env.consumer, nil))

	withHeaders := enqueueWithHeaders(t, db, "with.headers")
	enqueue(t, db, "without.headers", `{"k": 2}`, "")
	consumers := map[string]*headerConsumer{"default": env, "a": a, "b": b}
	waitfor.True(t, 20*time.Second, "two events, two attempts each, at each endpoint", func() bool {
		for _, c := range consumers {
			if len(c.requests()) != 4 {
				return false
			}
		}
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	for name, c := range consumers {
		attempts := map[string]int{}
		for _, r := range c.requests() {
			switch r.Header.Get("X-Fluxora-Event") {
			case "with.headers":
				checkHeaders(t, name, r)
				attempts[r.Attempt]++
				if name == "default" && r.ID != withHeaders || name != "default" && r.Endpoint != name {
					t.Fatalf("%s: request for %s/%s", name, r.ID, r.Endpoint)
				}
			case "without.headers":
				if r.Header.Get("Traceparent") != "" || r.Header.Get("X-Correlation-Id") != "" {
					t.Fatalf("%s: an event without headers got %v", name, r.Header)
				}
			}
		}
		if attempts["1"] != 1 || attempts["2"] != 1 {
			t.Fatalf("%s: attempts of the event with headers: %v", name, attempts)
		}
	}
}

// The headers survive a dead letter and come back with `worker dlq replay`:
// the WEBHOOK_URL endpoint's delivery and a table endpoint's.
func TestEventHeadersSurviveDLQReplay(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var accept atomic.Bool
	refuse := func(delivery) int {
		if accept.Load() {
			return http.StatusOK
		}
		return http.StatusBadRequest // permanent: dead-lettered at once
	}
	env := newHeaderConsumer(t, refuse)
	a := newHeaderConsumer(t, refuse)
	addEndpoint(t, db, "a", a.consumer)
	startInProcess(t, baseEnv(db, env.consumer, nil))

	enqueueWithHeaders(t, db, "with.headers")
	waitfor.True(t, 20*time.Second, "both deliveries dead-lettered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE headers = $1::jsonb", testHeadersJSON) == 2
	})
	accept.Store(true)
	if code, out, errs := ops(t, db, "dlq", "replay", "--all"); code != 0 || !strings.Contains(out, "replayed 2") {
		t.Fatalf("replay: exit %d %s%s", code, out, errs)
	}
	consumers := map[string]*headerConsumer{"default": env, "a": a}
	waitfor.True(t, 20*time.Second, "both replays delivered", func() bool {
		return len(env.requests()) == 2 && len(a.requests()) == 2
	})
	for name, c := range consumers {
		got := c.requests()
		if got[0].ID != got[1].ID || got[1].Attempt != "1" {
			t.Fatalf("%s: the replay is not the same delivery's fresh attempt: %+v", name, got)
		}
		for _, r := range got {
			checkHeaders(t, name, r)
		}
	}
}

// The sender adapter parses a row's headers on each attempt: a value that is
// not a JSON object of strings (which the CHECK keeps out of the table) is
// Permanent, naming the problem, and nothing is sent; a valid one is sent.
func TestEventHeadersAdapter(t *testing.T) {
	t.Parallel()
	c := newHeaderConsumer(t, nil)
	snd, err := sender.New(sender.Config{URL: c.srv.URL, Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sender.NewPerEndpoint(sender.PerEndpointConfig{Env: snd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	row := webhook.Delivery{DeliveryID: "0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10", EventType: "e", Payload: []byte(`{}`), Attempt: 1}
	for _, tc := range []struct{ headers, want string }{
		{`["traceparent"]`, "invalid headers: must be a JSON object of string values"},
		{`{"traceparent": 1}`, `invalid headers: "traceparent": the value must be a string`},
		{`{"X-Fluxora-Event": "forged"}`, `invalid Headers: "X-Fluxora-Event" may not be set`},
	} {
		row.Headers = []byte(tc.headers)
		if res := h.Send(context.Background(), row); res.Class != webhook.Permanent || !strings.Contains(res.Error, tc.want) {
			t.Errorf("%s: %+v, want Permanent with %q", tc.headers, res, tc.want)
		}
	}
	if n := len(c.requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	row.Headers = []byte(testHeadersJSON)
	if res := h.Send(context.Background(), row); res.Class != webhook.Delivered {
		t.Fatalf("valid headers: %+v", res)
	}
	checkHeaders(t, "default", c.requests()[0])
}
