package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/signingkey"
	"github.com/fluxora/webhook-worker/verify"
)

// issuedKey is the public key a command printed for the consumer.
func issuedKey(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if k, ok := strings.CutPrefix(line, publicKeyLine); ok {
			if _, err := signingkey.ParsePublic(k); err != nil {
				t.Fatalf("%q: %v", k, err)
			}
			return k
		}
	}
	t.Fatalf("no public key printed:\n%s", out)
	return ""
}

// specVerifies checks a request as the Standard Webhooks specification
// writes it, with Go's crypto/ed25519 alone: a "v1a," entry of
// webhook-signature is the standard base64 of the ed25519 signature, by
// the key whose base64 follows "whpk_", of webhook-id + "." +
// webhook-timestamp + "." + body.
func specVerifies(whpk string, r signedRequest) bool {
	pub, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(whpk, "whpk_"))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return false
	}
	content := r.header.Get("webhook-id") + "." + r.header.Get("webhook-timestamp") + "." + string(r.body)
	for _, entry := range strings.Split(r.header.Get("webhook-signature"), " ") {
		if b64, ok := strings.CutPrefix(entry, "v1a,"); ok {
			if sig, err := base64.StdEncoding.DecodeString(b64); err == nil && ed25519.Verify(pub, []byte(content), sig) {
				return true
			}
		}
	}
	return false
}

// kitVerifies checks r with the verify kit holding v's keys.
func kitVerifies(v verify.Verifier, r signedRequest) error {
	req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(r.body))
	req.Header = r.header.Clone()
	_, err := v.Verify(req)
	return err
}

// An endpoint added with --signature ed25519, delivered to by a worker
// (a retry among them): the public key printed verifies every attempt by
// the specification's text and with the kit, another key does not; the
// requests carry webhook-signature "v1a," and no x-fluxora-signature,
// though WEBHOOK_SIGNATURE_HEADERS asks for the Fluxora headers alone.
// Rotated, both keys sign during the grace; updated, the new key alone at
// once. list shows the public key; the private key appears in no output,
// log or metric, and is stored sealed.
func TestEd25519Endpoint(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	srv, got := recordingConsumer(t, true)
	out, _ := endpointsCLI(t, db, exitOK, "add", "--name", "ledger", "--url", srv.URL, "--signature", "ed25519")
	pub := issuedKey(t, out)
	private, _, sealed := storedSecrets(t, db, "ledger")
	if !sealed || signingkey.Public([]byte(private)) != pub || strings.Contains(out, "secret (shown once)") {
		t.Fatalf("add --signature ed25519: stored sealed %v, its public key printed %v:\n%s", sealed, signingkey.Public([]byte(private)) == pub, out)
	}
	privates := []string{private}
	other, _ := signingkey.Generate(signingkey.Ed25519) // a key that signs nothing here

	w := startInProcess(t, endpointsOnly(db, map[string]string{"WEBHOOK_SIGNATURE_HEADERS": "fluxora"}))
	check := func(phase string, accept, refuse []string) {
		t.Helper()
		for range 2 { // the 503 and its retry
			r := nextRequest(t, got, phase)
			what := phase + ", attempt " + r.header.Get("x-fluxora-attempt")
			if _, sent := r.header["X-Fluxora-Signature"]; sent || r.header.Get("x-fluxora-timestamp") != r.header.Get("webhook-timestamp") {
				t.Fatalf("%s: x-fluxora-signature sent, or the timestamps differ: %v", what, r.header)
			}
			if n := len(strings.Fields(r.header.Get("webhook-signature"))); n != len(accept) {
				t.Fatalf("%s: %d signatures, want %d", what, n, len(accept))
			}
			for _, k := range accept {
				if !specVerifies(k, r) || kitVerifies(verify.Verifier{Secret: []byte(k)}, r) != nil {
					t.Fatalf("%s: a key that signs it does not verify it", what)
				}
			}
			for _, k := range refuse {
				if specVerifies(k, r) || kitVerifies(verify.Verifier{Secret: []byte(k)}, r) == nil {
					t.Fatalf("%s: a key that does not sign it verifies it", what)
				}
			}
		}
	}
	enqueue(t, db, "invoice.paid", `{"n": 1}`, "")
	check("added", []string{pub}, []string{signingkey.Public([]byte(other))})

	// rotate-secret keeps the kind: a new key pair, the old one signing too.
	out, errs := endpointsCLI(t, db, exitOK, "rotate-secret", "ledger", "--grace", "1h")
	rotated := issuedKey(t, out)
	cur, prev, _ := storedSecrets(t, db, "ledger")
	if !strings.Contains(out, "until") || prev != private || signingkey.Public([]byte(cur)) != rotated || rotated == pub {
		t.Fatalf("rotate-secret: %s%s", out, errs)
	}
	privates = append(privates, cur)
	enqueue(t, db, "invoice.paid", `{"n": 2}`, "")
	check("during the grace", []string{rotated, pub}, []string{signingkey.Public([]byte(other))})

	// update --signature: a new key at once, the others sign nothing.
	out, _ = endpointsCLI(t, db, exitOK, "update", "ledger", "--signature", "ed25519")
	updated := issuedKey(t, out)
	cur, prev, _ = storedSecrets(t, db, "ledger")
	if prev != "" || signingkey.Public([]byte(cur)) != updated {
		t.Fatalf("update --signature: previous kept, or not the key printed:\n%s", out)
	}
	privates = append(privates, cur)
	enqueue(t, db, "invoice.paid", `{"n": 3}`, "")
	check("updated", []string{updated}, []string{rotated, pub})

	// list shows the public key and the kind, not without the key file.
	list, _ := endpointsCLI(t, db, exitOK, "list")
	listJSON, _ := endpointsCLI(t, db, exitOK, "list", "--json")
	var shown []map[string]any
	if err := json.Unmarshal([]byte(listJSON), &shown); err != nil || len(shown) != 1 || shown[0]["signature"] != "ed25519" ||
		shown[0]["public_key"] != updated || !strings.Contains(list, "SIGNATURE") || !strings.Contains(strings.Join(strings.Fields(list), " "), "ed25519 "+updated) {
		t.Fatalf("list:\n%s%s", list, listJSON)
	}
	var sealedOut, sealedErr bytes.Buffer
	env := map[string]string{"DATABASE_URL": db.URL}
	if code := run(ctx, []string{"endpoints", "list"}, func(k string) string { return env[k] }, &sealedOut, &sealedErr); code != exitOK ||
		strings.Contains(sealedOut.String(), "whpk_") || !strings.Contains(sealedOut.String(), "?") {
		t.Fatalf("list without the key file: exit %d\n%s%s", code, sealedOut.String(), sealedErr.String())
	}

	// No private key in the outputs, the logs or the metrics.
	_, metrics := httpGet(metricsBase(t, w.logs) + "/metrics")
	_, status, _ := ops(t, db, "status")
	for _, k := range privates {
		for what, text := range map[string]string{"logs": w.logs.String(), "list": list + listJSON, "status": status, "metrics": metrics} {
			if strings.Contains(text, k[5:30]) || strings.Contains(text, "whsk_") {
				t.Fatalf("%s holds a private key", what)
			}
		}
	}
}

// A rotation from a shared secret to a key pair (rotate-secret --signature
// ed25519): during the grace the consumer still holding the secret, and
// one given the public key, both accept; after it, the public key alone.
func TestRotationFromSecretToKeyPair(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	srv, got := recordingConsumer(t, false)
	endpointsCLI(t, db, exitOK, "add", "--name", "billing", "--url", srv.URL, "--secret", rotOld)
	startInProcess(t, endpointsOnly(db, nil))
	out, _ := endpointsCLI(t, db, exitOK, "rotate-secret", "billing", "--signature", "ed25519", "--grace", "1h")
	pub := issuedKey(t, out)
	enqueue(t, db, "invoice.paid", `{"n": 1}`, "")
	r := nextRequest(t, got, "during")
	if !strings.HasPrefix(r.header.Get("webhook-signature"), "v1a,") || !specVerifies(pub, r) || r.header.Get("x-fluxora-signature") != "" {
		t.Fatalf("during: webhook-signature %q, x-fluxora-signature %q", r.header.Get("webhook-signature"), r.header.Get("x-fluxora-signature"))
	}
	for name, v := range map[string]verify.Verifier{
		"the old secret": {Secret: []byte(rotOld)},
		"the public key": {Secret: []byte(pub)},
		"both":           {Secret: []byte(pub), Previous: []byte(rotOld), PreviousUntil: time.Now().Add(time.Hour)},
	} {
		if err := kitVerifies(v, r); err != nil {
			t.Fatalf("during the grace, %s: %v", name, err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE webhook_endpoints SET secret_previous_until = clock_timestamp() WHERE name = 'billing'`); err != nil {
		t.Fatal(err)
	}
	enqueue(t, db, "invoice.paid", `{"n": 2}`, "")
	r = nextRequest(t, got, "after")
	if n := len(strings.Fields(r.header.Get("webhook-signature"))); n != 1 || !specVerifies(pub, r) || kitVerifies(verify.Verifier{Secret: []byte(rotOld)}, r) == nil {
		t.Fatalf("after the grace: %d signatures, or the old secret still verifies", n)
	}
}

// The refusals of --signature and of the keys given, each exit 2 naming
// the flag, never quoting the value.
func TestSignatureRefusals(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	key, _ := signingkey.Generate(signingkey.Ed25519)
	pub := signingkey.Public([]byte(key))
	const bad = "whsk_bm90LWEta2V5LWF0LWFsbA=="
	endpointsCLI(t, db, exitOK, "add", "--name", "billing", "--url", "https://hooks.example.com/", "--secret", cliSecret)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "--name", "x", "--url", "https://hooks.example.com/", "--signature", "rsa"}, "--signature: \"rsa\": must be hmac or ed25519"},
		{[]string{"add", "--name", "x", "--url", "https://hooks.example.com/", "--signature", "ed25519", "--secret", cliSecret}, "--signature ed25519, but --secret is an hmac secret"},
		{[]string{"add", "--name", "x", "--url", "https://hooks.example.com/", "--signature", "hmac", "--secret", key}, "--signature hmac, but --secret is an ed25519 secret"},
		{[]string{"add", "--name", "x", "--url", "https://hooks.example.com/", "--secret", pub}, "--secret: is a public key (whpk_)"},
		{[]string{"add", "--name", "x", "--url", "https://hooks.example.com/", "--secret", bad}, "--secret: a whsk_ key must be"},
		{[]string{"rotate-secret", "billing", "--signature", "v1a"}, "--signature: \"v1a\""},
		{[]string{"rotate-secret", "billing", "--secret", pub}, "--secret: is a public key"},
		{[]string{"update", "billing", "--signature", ""}, "--signature: \"\": must be hmac or ed25519"},
	} {
		code, out, errs := ops(t, db, append([]string{"endpoints"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || strings.Contains(out+errs, key[5:30]) || strings.Contains(out+errs, pub[5:30]) ||
			strings.Contains(out+errs, bad[5:]) {
			t.Errorf("%q: exit %d %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	// A whsk_ key given as --secret is an ed25519 endpoint without
	// --signature: its public key is printed, not the key.
	out, _ := endpointsCLI(t, db, exitOK, "add", "--name", "imported", "--url", "https://hooks.example.com/", "--secret", key)
	if issuedKey(t, out) != pub || strings.Contains(out, key[5:30]) {
		t.Fatalf("add --secret whsk_…:\n%s", out)
	}
}
