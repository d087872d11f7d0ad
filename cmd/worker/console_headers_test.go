package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// The console's delivery page shows the headers of the request the worker
// sent: a keyed event with headers of its own, retried once at the
// WEBHOOK_URL endpoint and at a table endpoint, reaches real consumers on
// loopback; the console then shows, for the last attempt of each
// delivery, the same header names and values, the secret ones masked.
// Two values may differ: the timestamps carry the second the sender read
// its clock, and the console the second the attempt started, read just
// before (the same second, or the one before).
func TestConsoleShowsTheRequestSent(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	def, shop := newHeaderConsumer(t, failFirst()), newHeaderConsumer(t, failFirst())
	addEndpoint(t, db, "shop", shop.consumer)
	env := baseEnv(db, def.consumer, nil)
	w := startInProcess(t, env)
	var event string
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, headers, ordering_key)
		VALUES ('order.paid', '{"order": 7}', '{"traceparent": "00-abc-01", "X-Api-Key": "k-secret-1"}', 'order-7')
		RETURNING delivery_id::text`).Scan(&event); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 20*time.Second, "two attempts at each consumer, nothing pending", func() bool {
		return len(def.requests()) == 2 && len(shop.requests()) == 2 &&
			db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	if code := w.stop(t); code != exitOK {
		t.Fatalf("worker exit %d", code)
	}
	sent := map[string]http.Header{} // by delivery id: its last request
	for _, c := range []*headerConsumer{def, shop} {
		for _, r := range c.requests() {
			if r.Attempt == "2" {
				sent[r.ID] = r.Header
			}
		}
	}

	var shown struct {
		Requests []struct {
			DeliveryID string `json:"delivery_id"`
			Attempt    int
			Headers    [][2]string
		}
	}
	if err := json.Unmarshal([]byte(consoleGet(t, db, env, "api/deliveries/"+event)), &shown); err != nil {
		t.Fatal(err)
	}
	if len(shown.Requests) != 2 {
		t.Fatalf("the console shows %d requests, want the last of each of the 2 deliveries: %+v", len(shown.Requests), shown)
	}
	for _, r := range shown.Requests {
		real, ok := sent[r.DeliveryID]
		if !ok || r.Attempt != 2 {
			t.Fatalf("the console shows attempt %d of %s; the consumers got the second attempts of %v", r.Attempt, r.DeliveryID, sent)
		}
		compareShownHeaders(t, r.DeliveryID, r.Headers, real)
	}
}

// compareShownHeaders fails the test unless the headers the console shows
// are those of the request the consumer got: the same names (but
// Content-Length, the transport's), each value the same but the secret
// ones, masked, and the timestamps, a second early at most.
func compareShownHeaders(t *testing.T, id string, shown [][2]string, real http.Header) {
	t.Helper()
	secret := []string{"Webhook-Signature", "X-Fluxora-Signature", "X-Api-Key"}
	timestamps := []string{"Webhook-Timestamp", "X-Fluxora-Timestamp"}
	names := map[string]bool{}
	for _, kv := range shown {
		name := http.CanonicalHeaderKey(kv[0])
		names[name] = true
		want := real.Values(name)
		switch {
		case len(want) != 1:
			t.Errorf("%s: the console shows %s, the request had %q", id, kv[0], want)
		case slices.Contains(secret, name):
			if kv[1] != "••••••••" || want[0] == "" {
				t.Errorf("%s: %s shown as %q, sent as %q: want it masked", id, name, kv[1], want[0])
			}
		case slices.Contains(timestamps, name):
			at, _ := strconv.ParseInt(kv[1], 10, 64)
			if got, err := strconv.ParseInt(want[0], 10, 64); err != nil || got != at && got != at+1 {
				t.Errorf("%s: %s shown as %q, sent as %q", id, name, kv[1], want[0])
			}
		case kv[1] != want[0]:
			t.Errorf("%s: %s shown as %q, sent as %q", id, name, kv[1], want[0])
		}
	}
	for name := range real {
		if !names[name] && name != "Content-Length" {
			t.Errorf("%s: the request had %s: %q, the console does not show it", id, name, real.Values(name))
		}
	}
	for _, must := range append(secret, "Webhook-Ordering-Key", "Webhook-Sequence", "Traceparent", "X-Fluxora-Endpoint") {
		if !names[must] {
			t.Errorf("%s: neither sent nor shown: %s", id, must)
		}
	}
}

// consoleGet runs worker console over db with env until it has answered
// GET path (under its root) with 200, and returns the body.
func consoleGet(t *testing.T, db *testdb.DB, env map[string]string, path string) string {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "0123456789abcdef-console-headers-token"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cenv := map[string]string{"WEBHOOK_CONSOLE_TOKEN_FILE": tokenFile}
	for k, v := range env {
		cenv[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"console", "--addr", "127.0.0.1:0"}, func(k string) string { return cenv[k] }, pw, io.Discard)
		pw.Close()
	}()
	defer func() {
		cancel()
		<-done
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	req, _ := http.NewRequest("GET", strings.TrimSpace(strings.TrimPrefix(line, "console: serving "))+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	return string(body)
}
