package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/verify"
)

// The secrets of the rotation tests: no log, command output or metric may
// contain them.
const (
	rotOld = "whsec_b2xkLXNlY3JldC1iZWZvcmUtdGhlLXJvdGF0aW9u"
	rotNew = "whsec_bmV3LXNlY3JldC1hZnRlci10aGUtcm90YXRpb24h"
)

// signedRequest is one request as the consumer received it.
type signedRequest struct {
	header http.Header
	body   []byte
}

// recordingConsumer records every request whole. Each delivery's first
// attempt is answered 503 when failFirst, so that a retry follows.
func recordingConsumer(t *testing.T, failFirst bool) (*httptest.Server, chan signedRequest) {
	t.Helper()
	got := make(chan signedRequest, 100)
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- signedRequest{r.Header.Clone(), body}
		id := r.Header.Get("webhook-id")
		mu.Lock()
		first := !seen[id]
		seen[id] = true
		mu.Unlock()
		if failFirst && first {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// nextRequest waits for the consumer's next request.
func nextRequest(t *testing.T, got chan signedRequest, what string) signedRequest {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no request within 30s", what)
		return signedRequest{}
	}
}

// rotationCheck says which secrets must verify a request, checked by the
// official Standard Webhooks library and by our verify kit.
type rotationCheck struct {
	phase      string
	signatures int  // in webhook-signature
	oldOK      bool // the old secret alone verifies it
	// until is the end of the grace period the consumer was told (zero:
	// it holds no previous secret).
	until time.Time
}

func (c rotationCheck) verify(t *testing.T, r signedRequest) {
	t.Helper()
	lib := func(secret string) error {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		return wh.Verify(r.body, r.header)
	}
	kit := func(v verify.Verifier) error {
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(string(r.body)))
		req.Header = r.header.Clone()
		_, err := v.Verify(req)
		return err
	}
	what := c.phase + ", attempt " + r.header.Get("x-fluxora-attempt")
	if n := len(strings.Fields(r.header.Get("webhook-signature"))); n != c.signatures {
		t.Fatalf("%s: %d signatures in webhook-signature, want %d", what, n, c.signatures)
	}
	if r.header.Get("x-fluxora-signature") != verify.Sign([]byte(rotNew), mustAtoi64(t, r.header.Get("x-fluxora-timestamp")), r.body) &&
		c.phase != "before" {
		t.Fatalf("%s: x-fluxora-signature is not the new secret's alone", what)
	}
	newOK := c.phase != "before"
	for _, tc := range []struct {
		name string
		err  error
		ok   bool
	}{
		{"library, new secret", lib(rotNew), newOK},
		{"library, old secret", lib(rotOld), c.oldOK},
		{"kit, new secret", kit(verify.Verifier{Secret: []byte(rotNew)}), newOK},
		{"kit, old secret", kit(verify.Verifier{Secret: []byte(rotOld)}), c.oldOK},
		{"kit, new secret and the old one until the end of the grace", kit(verify.Verifier{Secret: []byte(rotNew),
			Previous: []byte(rotOld), PreviousUntil: c.until}), true},
	} {
		if (tc.err == nil) != tc.ok {
			t.Fatalf("%s: %s: err = %v, want ok = %v", what, tc.name, tc.err, tc.ok)
		}
	}
}

// A table endpoint's secret rotated with `worker endpoints rotate-secret`:
// signatures checked by the official library and the kit before, during
// (a retry among them, and across a worker restart, which keeps the stored
// end) and after the grace period.
func TestSecretRotation(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	srv, got := recordingConsumer(t, true)
	endpointsCLI(t, db, exitOK, "add", "--name", "billing", "--url", srv.URL, "--secret", rotOld)
	env := endpointsOnly(db, nil)
	w := startInProcess(t, env)

	enqueue(t, db, "invoice.paid", `{"n": 1}`, "")
	before := rotationCheck{phase: "before", signatures: 1, oldOK: true, until: time.Now().Add(time.Hour)}
	for i := range 2 { // the 503 and its retry
		r := nextRequest(t, got, "before")
		if i == 0 && r.header.Get("x-fluxora-signature") != verify.Sign([]byte(rotOld), mustAtoi64(t, r.header.Get("x-fluxora-timestamp")), r.body) {
			t.Fatal("before: x-fluxora-signature is not the old secret's")
		}
		// Before the rotation the old secret is the current one: the kit
		// given the new one fails, given both it verifies.
		before.verifyBefore(t, r)
	}

	code, out, errs := ops(t, db, "endpoints", "rotate-secret", "billing", "--secret", rotNew, "--grace", "1h")
	if code != exitOK || !strings.Contains(out, "until") {
		t.Fatalf("rotate-secret: exit %d\n%s%s", code, out, errs)
	}
	var until time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT secret_previous_until FROM webhook_endpoints WHERE name = 'billing'`).Scan(&until); err != nil {
		t.Fatal(err)
	}
	during := rotationCheck{phase: "during", signatures: 2, oldOK: true, until: until}
	enqueue(t, db, "invoice.paid", `{"n": 2}`, "")
	for range 2 {
		during.verify(t, nextRequest(t, got, "during"))
	}

	// A restart neither extends nor shortens the grace period.
	if code := w.stop(t); code != exitOK {
		t.Fatalf("worker exit %d", code)
	}
	w = startInProcess(t, env)
	enqueue(t, db, "invoice.paid", `{"n": 3}`, "")
	for range 2 {
		during.verify(t, nextRequest(t, got, "during, after a restart"))
	}
	var after time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT secret_previous_until FROM webhook_endpoints WHERE name = 'billing'`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if !after.Equal(until) {
		t.Fatalf("the grace period ended at %s before the restart, %s after", until, after)
	}

	// The end of the grace period: the database clock passes it. (Setting
	// the stored end to now stands for an hour going by.)
	if _, err := db.Pool.Exec(ctx, `UPDATE webhook_endpoints SET secret_previous_until = clock_timestamp() WHERE name = 'billing'`); err != nil {
		t.Fatal(err)
	}
	ended := rotationCheck{phase: "after", signatures: 1, oldOK: false, until: time.Now().Add(-time.Second)}
	enqueue(t, db, "invoice.paid", `{"n": 4}`, "")
	for range 2 {
		ended.verify(t, nextRequest(t, got, "after"))
	}

	// No secret in the worker's logs, the command outputs or the metrics.
	base := metricsBase(t, w.logs)
	_, metrics := httpGet(base + "/metrics")
	_, list, _ := ops(t, db, "endpoints", "list")
	_, listJSON, _ := ops(t, db, "endpoints", "list", "--json")
	_, status, _ := ops(t, db, "status")
	for what, text := range map[string]string{"logs": w.logs.String(), "rotate-secret": out + errs, "list": list + listJSON,
		"status": status, "metrics": metrics} {
		for _, s := range []string{rotOld, rotNew, rotOld[6:], rotNew[6:]} {
			if strings.Contains(text, s) {
				t.Fatalf("%s holds a secret", what)
			}
		}
	}
}

// verifyBefore checks a request signed before any rotation: the old secret
// is the only one.
func (c rotationCheck) verifyBefore(t *testing.T, r signedRequest) {
	t.Helper()
	if n := len(strings.Fields(r.header.Get("webhook-signature"))); n != 1 {
		t.Fatalf("before: %d signatures, want 1", n)
	}
	wh, err := standardwebhooks.NewWebhook(rotOld)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(r.body, r.header); err != nil {
		t.Fatalf("before: the library refuses the old secret: %v", err)
	}
	req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(string(r.body)))
	req.Header = r.header.Clone()
	if _, err := (&verify.Verifier{Secret: []byte(rotOld)}).Verify(req); err != nil {
		t.Fatalf("before: the kit refuses the old secret: %v", err)
	}
	req = httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(string(r.body)))
	req.Header = r.header.Clone()
	if _, err := (&verify.Verifier{Secret: []byte(rotNew)}).Verify(req); err == nil {
		t.Fatal("before: the kit accepts a secret not yet in use")
	}
}

// The WEBHOOK_URL endpoint rotates through WEBHOOK_SECRET_PREVIOUS and
// WEBHOOK_SECRET_PREVIOUS_UNTIL: both signatures until the end, the new
// one alone after it.
func TestEnvSecretRotation(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	srv, got := recordingConsumer(t, false)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	env := baseEnv(db, nil, map[string]string{"WEBHOOK_URL": srv.URL, "WEBHOOK_SECRET": rotNew,
		"WEBHOOK_SECRET_PREVIOUS": rotOld, "WEBHOOK_SECRET_PREVIOUS_UNTIL": until.Format(time.RFC3339)})
	w := startInProcess(t, env)
	enqueue(t, db, "invoice.paid", `{"n": 1}`, "")
	rotationCheck{phase: "during", signatures: 2, oldOK: true, until: until}.verify(t, nextRequest(t, got, "during"))
	w.stop(t)

	past := time.Now().Add(-time.Minute).UTC()
	env["WEBHOOK_SECRET_PREVIOUS_UNTIL"] = past.Format(time.RFC3339)
	w = startInProcess(t, env)
	enqueue(t, db, "invoice.paid", `{"n": 2}`, "")
	rotationCheck{phase: "after", signatures: 1, oldOK: false, until: past}.verify(t, nextRequest(t, got, "after"))
	if !strings.Contains(w.logs.String(), "WEBHOOK_SECRET_PREVIOUS_UNTIL has passed") {
		t.Fatalf("no warning that the previous secret's grace period is over:\n%s", w.logs.String())
	}
	if strings.Contains(w.logs.String(), rotOld[6:]) || strings.Contains(w.logs.String(), rotNew[6:]) {
		t.Fatal("the logs hold a secret")
	}
}

func mustAtoi64(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// --secret-file reads the secret from a file's first line (a pipe through
// /dev/stdin works the same), so that it never stands in the process list.
func TestSecretFile(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := write("first", rotOld+"\n")
	second := write("second", rotNew+"\r\nignored second line\n")
	empty := write("empty", "\n"+rotNew)
	endpointsCLI(t, db, exitOK, "add", "--name", "billing", "--url", "https://hooks.example.com/", "--secret-file", first)
	if cur, _, sealed := storedSecrets(t, db, "billing"); cur != rotOld || !sealed {
		t.Fatal("add --secret-file did not store the file's first line, sealed")
	}
	code, out, errs := ops(t, db, "endpoints", "rotate-secret", "billing", "--secret-file", second)
	if code != exitOK || strings.Contains(out+errs, rotNew) || strings.Contains(out, "shown once") {
		t.Fatalf("rotate-secret --secret-file: exit %d\n%s%s", code, out, errs)
	}
	if cur, prev, sealed := storedSecrets(t, db, "billing"); cur != rotNew || prev != rotOld || !sealed {
		t.Fatal("rotate-secret --secret-file did not store the file's first line as the new secret, sealed")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rotate-secret", "billing", "--secret-file", empty}, "holds no secret on its first line"},
		{[]string{"rotate-secret", "billing", "--secret-file", dir + "/missing"}, "no such file"},
		{[]string{"rotate-secret", "billing", "--secret-file", first, "--secret", "x"}, "not both"},
		{[]string{"add", "--name", "x", "--url", "https://hooks.example.com/", "--secret-file", empty}, "--secret-file"},
	} {
		code, out, errs := ops(t, db, append([]string{"endpoints"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || strings.Contains(out+errs, rotNew[6:]) {
			t.Errorf("%q: exit %d %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}
