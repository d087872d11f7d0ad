package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// A real worker process: the endpoint "shop" answers 410 Gone, the
// worker disables it, and in the same transaction writes
// fluxora.endpoint.disabled, which it delivers, signed, to the endpoint
// "ops" that subscribes to it, with the console's URL and no secret.
func TestWorkerDeliversEndpointDisabled(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, func(d delivery) int {
		if d.Endpoint == "shop" {
			return http.StatusGone
		}
		return http.StatusOK
	})
	c.secret = cliSecret
	endpointsCLI(t, db, exitOK, "add", "--name", "shop", "--url", c.srv.URL+"/shop", "--events", "order.*", "--secret", cliSecret)
	endpointsCLI(t, db, exitOK, "add", "--name", "ops", "--url", c.srv.URL+"/ops", "--events", "fluxora.endpoint.*", "--secret", cliSecret)
	startProcess(t, envFor(db.URL, nil, map[string]string{"WEBHOOK_CONSOLE_URL": "https://console.example.com/"}))
	db.Insert(t, "order.paid", `{"card":"4242"}`)
	var got delivery
	waitfor.True(t, 30*time.Second, "fluxora.endpoint.disabled delivered to ops", func() bool {
		for _, d := range c.deliveries() {
			if d.Event == "fluxora.endpoint.disabled" && d.Status == http.StatusOK {
				got = d
				return true
			}
		}
		return false
	})
	if !got.SignatureOK || got.Endpoint != "ops" {
		t.Fatalf("disabled event: signature ok %v, endpoint %q", got.SignatureOK, got.Endpoint)
	}
	var body map[string]any
	if err := json.Unmarshal(got.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["endpoint"] != "shop" || body["console_url"] != "https://console.example.com" || body["reason"] == "" || body["occurred_at"] == nil {
		t.Errorf("payload: %s", got.Body)
	}
	if bytes.Contains(got.Body, []byte("4242")) || bytes.Contains(got.Body, []byte(cliSecret)) {
		t.Errorf("payload carries the failed delivery's payload or a secret: %s", got.Body)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type = 'fluxora.endpoint.disabled' AND endpoint_id IS NULL"); n != 1 {
		t.Errorf("%d disabled events, want 1", n)
	}
}

// WEBHOOK_CONSOLE_URL: an absolute http(s) URL without credentials or
// query; its trailing slash dropped.
func TestConsoleURLConfig(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]string{"": "", "https://c.example.com/": "https://c.example.com", "http://10.0.0.1:8089/x": "http://10.0.0.1:8089/x"} {
		e := &env{getenv: func(string) string { return v }}
		if got := e.consoleURL("WEBHOOK_CONSOLE_URL"); got != want || len(e.errs) != 0 {
			t.Errorf("%q: %q, %v", v, got, e.errs)
		}
	}
	for _, v := range []string{"console.example.com", "ftp://c.example.com", "https://u:p@c.example.com", "https://c.example.com/?token=1", "https://c.example.com/#x"} {
		e := &env{getenv: func(string) string { return v }}
		if e.consoleURL("WEBHOOK_CONSOLE_URL"); len(e.errs) != 1 || !strings.Contains(e.errs[0].Error(), "WEBHOOK_CONSOLE_URL") ||
			strings.Contains(e.errs[0].Error(), "u:p") {
			t.Errorf("%q: %v", v, e.errs)
		}
	}
}
