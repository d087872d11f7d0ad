package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/sealed"
)

// keysCLI runs an operator command with this key file (none for "").
func keysCLI(t *testing.T, db *testdb.DB, keyFile string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	env := map[string]string{"DATABASE_URL": db.URL, "WEBHOOK_SECRETS_KEY_FILE": keyFile}
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	return code, out.String(), errb.String()
}

// The commands that store a secret need the key file: without it they
// exit 2 naming it, and store nothing.
func TestStoringASecretNeedsTheKeyFile(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	endpointsCLI(t, db, exitOK, "add", "--name", "shop", "--url", "https://hooks.example.com/", "--secret", cliSecret)
	for _, args := range [][]string{
		{"endpoints", "add", "--name", "x", "--url", "https://hooks.example.com/"},
		{"endpoints", "rotate-secret", "shop"},
		{"keys", "rotate"},
		{"keys", "encrypt-existing"},
	} {
		code, out, errs := keysCLI(t, db, "", args...)
		if code != exitUsage || !strings.Contains(errs, "WEBHOOK_SECRETS_KEY_FILE: is required") || strings.Contains(out, "whsec_") {
			t.Errorf("%q without a key file: exit %d\n%s%s", args, code, out, errs)
		}
	}
	if cur, prev, sealed := storedSecrets(t, db, "shop"); cur != cliSecret || prev != "" || !sealed ||
		db.Count(t, "SELECT count(*) FROM webhook_endpoints") != 1 {
		t.Fatal("a refused command changed the endpoints")
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("k1:c2hvcnQ=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := keysCLI(t, db, bad, "endpoints", "add", "--name", "x", "--url", "https://hooks.example.com/")
	if code != exitUsage || !strings.Contains(errs, "WEBHOOK_SECRETS_KEY_FILE: "+bad+`: line 1: key "k1" must be the standard base64 of 32 bytes`) ||
		strings.Contains(errs, "c2hvcnQ") {
		t.Fatalf("a bad key file: exit %d %s", code, errs)
	}
}

func TestKeysGenerate(t *testing.T) {
	t.Parallel()
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"keys", "generate", "--id", "prod-2"}, func(string) string { return "" }, &out, &errb); code != exitOK {
		t.Fatalf("exit %d %s", code, errb.String())
	}
	k, err := sealed.ParseKeyFile(strings.NewReader(out.String()))
	if err != nil || k.Primary() != "prod-2" || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("generated %q: %v", out.String(), err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"keys", "generate"}, func(string) string { return "" }, &out, &errb); code != exitOK ||
		!strings.HasPrefix(out.String(), time.Now().UTC().Format("20060102")+"-") {
		t.Fatalf("default id: exit %d %q", code, out.String())
	}
	if code := run(context.Background(), []string{"keys", "generate", "--id", "a:b"}, func(string) string { return "" }, &out, &errb); code != exitUsage {
		t.Fatalf("--id a:b: exit %d", code)
	}
}

// encrypt-existing seals the plaintexts of before (idempotent); rotate
// moves every sealed value under the file's new first key, in one
// transaction; a key file without the old key then opens them all.
func TestKeysEncryptExistingAndRotate(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret, secret_previous, secret_previous_until)
		VALUES ('old', 'https://hooks.example.com/', 'whsec_plain_one', 'whsec_plain_prev', now() + interval '1 hour'),
		       ('older', 'https://hooks.example.com/', 'whsec_plain_two', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	endpointsCLI(t, db, exitOK, "add", "--name", "new", "--url", "https://hooks.example.com/", "--secret", cliSecret)
	keys := testKeyFile(t)
	if code, out, errs := keysCLI(t, db, keys, "keys", "encrypt-existing", "--dry-run"); code != exitOK || !strings.Contains(out, "2 endpoints' credentials would be") {
		t.Fatalf("dry run: exit %d %s%s", code, out, errs)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_endpoints WHERE secret NOT LIKE 'fxsealed:%'`); n != 2 {
		t.Fatalf("the dry run changed %d", 2-n)
	}
	for i, want := range []string{"2 endpoints", "0 endpoints"} {
		code, out, errs := keysCLI(t, db, keys, "keys", "encrypt-existing")
		if code != exitOK || !strings.Contains(out, want) || strings.Contains(out+errs, "whsec_") {
			t.Fatalf("encrypt-existing #%d: exit %d %s%s", i+1, code, out, errs)
		}
	}
	for name, want := range map[string][2]string{"old": {"whsec_plain_one", "whsec_plain_prev"}, "older": {"whsec_plain_two", ""}, "new": {cliSecret, ""}} {
		if cur, prev, sealed := storedSecrets(t, db, name); cur != want[0] || prev != want[1] || !sealed {
			t.Errorf("%s after encrypt-existing: %q %q sealed %v", name, cur, prev, sealed)
		}
	}

	// A new first key, the old ones below it.
	dir := t.TempDir()
	newKey := writeKeyFile(dir, "new-only", "test-2")
	line, _ := os.ReadFile(newKey)
	old, _ := os.ReadFile(keys)
	both := filepath.Join(dir, "both")
	if err := os.WriteFile(both, append(line, old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := keysCLI(t, db, newKey, "keys", "rotate"); code != exitUsage || !strings.Contains(errs, `key id "test-1"`) ||
		!strings.Contains(errs, "nothing was changed") {
		t.Fatalf("rotate without the old key: exit %d %s", code, errs)
	}
	if code, out, errs := keysCLI(t, db, both, "keys", "rotate"); code != exitOK || !strings.Contains(out, `3 endpoints' credentials rewritten, encrypted under key "test-2"`) {
		t.Fatalf("rotate: exit %d %s%s", code, out, errs)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_endpoints WHERE secret LIKE 'fxsealed:v1:test-2:%'
		AND (secret_previous IS NULL OR secret_previous LIKE 'fxsealed:v1:test-2:%')`); n != 3 {
		t.Fatalf("%d endpoints under the new key, want 3", n)
	}
	if code, out, _ := keysCLI(t, db, newKey, "keys", "rotate"); code != exitOK || !strings.Contains(out, "0 endpoints") {
		t.Fatalf("rotate again with the new key alone: exit %d %s", code, out)
	}
}

// A worker that finds a sealed secret it cannot open refuses to start
// (exit 2, naming the key id and the variable), never sending unsigned;
// a plaintext of before is a warning; a worker with the key delivers,
// signed, and nothing it prints holds the secret or its ciphertext.
func TestWorkerOpensSealedSecrets(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	c.secret = cliSecret
	endpointsCLI(t, db, exitOK, "add", "--name", "shop", "--url", c.srv.URL, "--secret", cliSecret)
	var stored string
	if err := db.Pool.QueryRow(context.Background(), `SELECT secret FROM webhook_endpoints`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	enqueue(t, db, "order.paid", `{"n": 1}`, "")

	other := writeKeyFile(t.TempDir(), "other", "test-9")
	for _, tc := range []struct{ keys, want string }{
		{"", `WEBHOOK_SECRETS_KEY_FILE: is not set, and the secret of endpoint "shop" is sealed with key id "test-1"`},
		{other, `WEBHOOK_SECRETS_KEY_FILE: the secret of endpoint "shop" is sealed with key id "test-1", which the key file does not hold`},
	} {
		p := startProcess(t, endpointsOnly(db, map[string]string{"WEBHOOK_SECRETS_KEY_FILE": tc.keys}))
		if code := p.wait(t, 30*time.Second); code != exitUsage || !strings.Contains(strings.ReplaceAll(p.logs.String(), `\"`, `"`), tc.want) {
			t.Fatalf("key file %q: exit %d, want 2 with %q:\n%s", tc.keys, code, tc.want, p.logs.String())
		}
		noSecretIn(t, "refusal", p.logs.String(), stored)
	}
	if len(c.deliveries()) != 0 {
		t.Fatal("a worker that refused to start delivered")
	}

	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('legacy', $1, 'whsec_legacy_plain')`,
		c.srv.URL+"/legacy"); err != nil {
		t.Fatal(err)
	}
	w := startInProcess(t, endpointsOnly(db, nil))
	waitfor.True(t, 20*time.Second, "delivered", func() bool { return len(c.deliveries()) >= 2 })
	for _, d := range c.deliveries() {
		if d.Endpoint == "shop" && !d.SignatureOK {
			t.Fatal("the sealed secret did not sign")
		}
	}
	waitfor.True(t, 10*time.Second, "warning", func() bool { return strings.Contains(w.logs.String(), `"plaintext_secrets":1`) })
	_, status, _ := ops(t, db, "status", "--json")
	_, list, _ := ops(t, db, "endpoints", "list", "--json")
	for what, text := range map[string]string{"logs": w.logs.String(), "status": status, "list": list} {
		noSecretIn(t, what, text, stored)
	}
}

// noSecretIn fails if text holds the test's secrets, or a sealed value.
func noSecretIn(t *testing.T, what, text string, sealedValues ...string) {
	t.Helper()
	for _, s := range append([]string{cliSecret, "whsec_legacy_plain", sealed.Prefix, "PRIVATE KEY"}, sealedValues...) {
		if strings.Contains(text, s) {
			t.Errorf("%s holds %q:\n%s", what, s, text)
		}
	}
}
