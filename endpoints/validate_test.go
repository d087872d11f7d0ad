package endpoints

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

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
