package endpoints

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// validateURL refuses exactly what webhook_url_problem refuses, with the
// same text (the same list as sql's test of sender.ValidateURL).
func TestURLRulesMatchTheDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, raw := range []string{
		"https://example.com", "https://example.com/hooks/in?tenant=1", "HTTPS://Example.COM:8443/x",
		"https://203.0.113.7/hook", "http://localhost", "http://LOCALHOST:9000/hook", "http://127.0.0.1:8080",
		"http://127.1.2.3/hook", "http://[::1]/", "http://[::1]:8080/hook", "http://[::ffff:127.0.0.1]/",
		"https://example.com:/", "https://[2001:db8::1]:8443/",
		"", "http://example.com", "http://10.0.0.1/", "http://localhost.example.com/", "http://0.0.0.0/",
		"ftp://example.com/", "ws://localhost/", "file:///etc/passwd", "https:///path", "https://:443/",
		"https://example.com:0/", "https://example.com:65536/", "https://example.com:abc/", "/relative/path",
		"example.com/hook", "//example.com/hook", "https:example.com", "http://user:pass@localhost/",
		"https://user@example.com/", "https://@example.com/", "https://example.com/#frag", "https://example.com/#",
		"https://exa mple.com/", "https://example.com/a b", "https://example.com/\x7f", "https://example.com/\n",
		"https://example.com/\t", "pass:word@example.com", "https://example.com:99999999999/",
	} {
		var problem *string
		if err := db.Pool.QueryRow(context.Background(), "SELECT webhook_url_problem($1)", raw).Scan(&problem); err != nil {
			t.Fatal(err)
		}
		err := validateURL(raw)
		var fe *FieldError
		switch {
		case err == nil && problem != nil:
			t.Errorf("%q: Go accepts it, the database refuses it: %s", raw, *problem)
		case err != nil && problem == nil:
			t.Errorf("%q: the database accepts it, Go refuses it: %v", raw, err)
		case err != nil && (!errors.As(err, &fe) || fe.Field != "url" || fe.Problem != *problem):
			t.Errorf("%q: Go says %q, the database %q", raw, err, *problem)
		}
	}
}

// What the table's trigger refuses (a plain SQL write, or a rule Go does
// not check) becomes a FieldError with the trigger's text.
func TestDatabaseRefusalsBecomeFieldErrors(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, tc := range []struct {
		name, url, secret string
		field, want       string
	}{
		{"x", "http://example.com/", "whsec_sekrit", "url", "must be https (http only for a loopback host)"},
		{"bad name", "https://example.com/", "whsec_sekrit", "name", "must be 1-64 letters"},
		{"nosecret", "https://example.com/", "", "secret", "must not be empty"},
	} {
		_, err := db.Pool.Exec(context.Background(), "INSERT INTO webhook_endpoints (name, url, secret) VALUES ($1, $2, $3)", tc.name, tc.url, tc.secret)
		err = dbError("add endpoint", tc.name, err)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || fe.Problem != tc.want && !strings.HasPrefix(fe.Problem, tc.want) {
			t.Errorf("%s: %v, want %s: %s", tc.name, err, tc.field, tc.want)
		}
		if strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%s: the secret in %v", tc.name, err)
		}
	}
}
