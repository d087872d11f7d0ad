package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/verify"
)

// Real deliveries, a retry among them, verified by the official Standard
// Webhooks library: the WEBHOOK_URL endpoint with a whsec_ secret, a table
// endpoint with a secret that is not (its raw bytes are the key), and one
// with a whsec_ secret whose base64 lacks its '=' padding (as the npm
// libraries accept it). The official Go library v1.3.0 decodes padded
// base64 only: it is given the padded form of that key; the verify kit
// checks the same requests with the unpadded secret itself.
func TestStandardWebhooksLibraryVerifiesDeliveries(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	const envSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const rawSecret = "a shared secret that is not base64"
	const paddedSecret = "whsec_c2VjcmV0LWJlZm9yZS10aGUtcm90YXRpb24="
	unpaddedSecret := strings.TrimRight(paddedSecret, "=")
	type verdict struct {
		endpoint, id string
		attempt      string
		err          error
	}
	verdicts := make(chan verdict, 100)
	var mu sync.Mutex
	seen := map[string]bool{}
	consumer := func(name string, wh *standardwebhooks.Webhook, kit *verify.Verifier) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			id := r.Header.Get("webhook-id")
			err := wh.Verify(body, r.Header)
			if err == nil && kit != nil {
				_, err = kit.CheckStandard(id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body)
			}
			verdicts <- verdict{name, id, r.Header.Get("x-fluxora-attempt"), err}
			mu.Lock()
			first := !seen[name+id]
			seen[name+id] = true
			mu.Unlock()
			if first {
				w.WriteHeader(http.StatusServiceUnavailable) // every first attempt: a retry follows
			}
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	envWH, err := standardwebhooks.NewWebhook(envSecret)
	if err != nil {
		t.Fatal(err)
	}
	rawWH, err := standardwebhooks.NewWebhookRaw([]byte(rawSecret))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := standardwebhooks.NewWebhook(unpaddedSecret); err == nil {
		t.Log("the official Go library now accepts an unpadded whsec_ secret")
	}
	paddedWH, err := standardwebhooks.NewWebhook(paddedSecret)
	if err != nil {
		t.Fatal(err)
	}
	envSrv, rawSrv := consumer("default", envWH, nil), consumer("raw", rawWH, nil)
	unpaddedSrv := consumer("unpadded", paddedWH, &verify.Verifier{Secret: []byte(unpaddedSecret)})
	for _, ep := range [][3]string{{"raw", rawSrv.URL, rawSecret}, {"unpadded", unpaddedSrv.URL, unpaddedSecret}} {
		if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret) VALUES ($1, $2, $3)`,
			ep[0], ep[1], ep[2]); err != nil {
			t.Fatal(err)
		}
	}
	startInProcess(t, baseEnv(db, nil, map[string]string{"WEBHOOK_URL": envSrv.URL, "WEBHOOK_SECRET": envSecret}))
	for range 3 {
		enqueue(t, db, "invoice.paid", `{"amount": 10}`, "")
	}
	got := map[string]int{}
	deadline := time.After(30 * time.Second)
	for len(got) < 18 { // 3 events × 3 endpoints × 2 attempts
		select {
		case v := <-verdicts:
			if v.err != nil {
				t.Fatalf("%s, delivery %s attempt %s: the official library refuses it: %v", v.endpoint, v.id, v.attempt, v.err)
			}
			got[v.endpoint+"/"+v.id+"/"+v.attempt]++
		case <-deadline:
			t.Fatalf("only %d verified requests: %v", len(got), got)
		}
	}
	waitfor.True(t, 20*time.Second, "all delivered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
}
