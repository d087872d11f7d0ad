package endpoints_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/internal/testtls"
)

// stored reads an endpoint's id and stored secret and client columns.
func stored(t *testing.T, b bundle, name string) (id, secret, cert, key string) {
	t.Helper()
	err := b.db.Pool.QueryRow(context.Background(), `SELECT id::text, secret, coalesce(client_cert, ''), coalesce(client_key, '')
		FROM webhook_endpoints WHERE name = $1`, name).Scan(&id, &secret, &cert, &key)
	if err != nil {
		t.Fatal(err)
	}
	return id, secret, cert, key
}

func TestCredentialsAreStoredSealed(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	ca := testtls.NewCA(t, "test CA")
	pair := ca.Client(t, "billing", 48*time.Hour)
	// A file holding the key beside the certificate: the key must not be
	// stored with the chain.
	both := append(append([]byte{}, pair.CertPEM...), pair.KeyPEM...)
	e, err := s.Create(ctx, endpoints.NewEndpoint{Name: "billing", URL: "https://hooks.example.com/", Secret: secret,
		ClientCert: &endpoints.ClientCert{CertPEM: both, KeyPEM: pair.KeyPEM}})
	if err != nil {
		t.Fatal(err)
	}
	id, sec, cert, key := stored(t, b, "billing")
	if id != e.ID || sec == secret || !strings.HasPrefix(sec, testPrefix) {
		t.Fatalf("secret stored as %q", sec)
	}
	if got, err := (testSealer{}).OpenSecret(id, sec); err != nil || got != secret {
		t.Fatalf("stored secret opens to %q, %v", got, err)
	}
	if strings.Contains(cert, "PRIVATE KEY") || !strings.Contains(cert, "CERTIFICATE") || strings.Contains(key, "PRIVATE KEY") {
		t.Fatalf("client certificate stored as %q, key %q", cert, key)
	}
	if e.ClientCertNotAfter == nil || !e.ClientCertNotAfter.Equal(pair.NotAfter.Truncate(time.Second)) {
		t.Fatalf("ClientCertNotAfter %v, want %v", e.ClientCertNotAfter, pair.NotAfter)
	}

	t.Run("update replaces and removes the certificate", func(t *testing.T) {
		next := ca.Client(t, "billing", 72*time.Hour)
		e, err := s.Update(ctx, "billing", endpoints.Update{ClientCert: &endpoints.ClientCert{CertPEM: next.CertPEM, KeyPEM: next.KeyPEM}})
		if err != nil || e.ClientCertNotAfter == nil || !e.ClientCertNotAfter.Equal(next.NotAfter.Truncate(time.Second)) {
			t.Fatalf("update: %+v, %v", e.ClientCertNotAfter, err)
		}
		if e, err = s.Update(ctx, "billing", endpoints.Update{ClientCert: &endpoints.ClientCert{}}); err != nil || e.ClientCertNotAfter != nil {
			t.Fatalf("removal: %+v, %v", e.ClientCertNotAfter, err)
		}
		if _, _, cert, key := stored(t, b, "billing"); cert != "" || key != "" {
			t.Fatal("the removed certificate stayed")
		}
	})
	t.Run("a bad pair is refused without quoting it", func(t *testing.T) {
		other := ca.Client(t, "x", time.Hour)
		expired := ca.Client(t, "x", -time.Minute)
		for _, c := range []endpoints.ClientCert{
			{CertPEM: pair.CertPEM, KeyPEM: other.KeyPEM}, {CertPEM: []byte("junk"), KeyPEM: pair.KeyPEM},
			{CertPEM: expired.CertPEM, KeyPEM: expired.KeyPEM},
		} {
			_, err := s.Update(ctx, "billing", endpoints.Update{ClientCert: &c})
			var fe *endpoints.FieldError
			if !errors.As(err, &fe) || fe.Field != "client-cert-file" || strings.Contains(err.Error(), "PRIVATE") {
				t.Errorf("update with a bad pair: %v", err)
			}
		}
	})
	t.Run("a plaintext secret of before is sealed by a rotation", func(t *testing.T) {
		exec(t, b.db, `UPDATE webhook_endpoints SET secret = 'whsec_plain_before' WHERE name = 'billing'`)
		if _, err := s.RotateSecret(ctx, "billing", "whsec_plain_before", time.Hour); err == nil {
			t.Fatal("a rotation to the current plaintext secret was accepted")
		}
		if _, err := s.RotateSecret(ctx, "billing", "whsec_after", time.Hour); err != nil {
			t.Fatal(err)
		}
		var prev string
		if err := b.db.Pool.QueryRow(ctx, `SELECT secret_previous FROM webhook_endpoints WHERE name = 'billing'`).Scan(&prev); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(prev, testPrefix) {
			t.Fatalf("the previous secret stayed plaintext: %q", prev)
		}
	})
}

func TestNoSealerStoresNoSecret(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	s, err := endpoints.New(endpoints.Config{Pool: b.db.Pool})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Add(ctx, "x", "https://hooks.example.com/", nil, secret, 0); !errors.Is(err, endpoints.ErrNoSealer) {
		t.Fatalf("Add: %v", err)
	}
	exec(t, b.db, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('old', 'https://hooks.example.com/', 'whsec_x')`)
	if _, err := s.RotateSecret(ctx, "old", "whsec_y", time.Hour); !errors.Is(err, endpoints.ErrNoSealer) {
		t.Fatalf("RotateSecret: %v", err)
	}
	s2 := "whsec_z"
	if _, err := s.Update(ctx, "old", endpoints.Update{Secret: &s2}); !errors.Is(err, endpoints.ErrNoSealer) {
		t.Fatalf("Update: %v", err)
	}
}
