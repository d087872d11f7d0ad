package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements on the endpoints' stored credentials as a whole: the
// worker's start-up check that it can open every sealed one, `worker keys
// rotate` and `worker keys encrypt-existing` (which seal them again in one
// transaction), and the client certificates the workers load. Values are
// read and written as the columns hold them (sealed, or a plaintext stored
// before migration 014); this package never opens one.

// credentialsSQL reads every endpoint's stored credentials, by name: the
// secret, the previous secret ("" for none, whatever its grace), the
// client certificate's key ("" for none).
const credentialsSQL = `SELECT id::text, name, secret, coalesce(secret_previous, ''), coalesce(client_key, '')
FROM webhook_endpoints ORDER BY name`

// Credentials are one endpoint's stored credentials, as the columns hold
// them.
type Credentials struct {
	ID, Name  string
	Secret    string
	Previous  string // "" for none
	ClientKey string // "" for none
}

// Credentials returns every endpoint's stored credentials
// (credentialsSQL).
func (s *Store) Credentials(ctx context.Context) ([]Credentials, error) {
	rows, err := s.pool.Query(ctx, credentialsSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanCredentials)
}

func scanCredentials(r pgx.CollectableRow) (Credentials, error) {
	var c Credentials
	err := r.Scan(&c.ID, &c.Name, &c.Secret, &c.Previous, &c.ClientKey)
	return c, err
}

// resealSQL writes an endpoint's credentials back: an empty previous
// secret or client key stays NULL.
const resealSQL = `UPDATE webhook_endpoints SET secret = @secret,
  secret_previous = CASE WHEN secret_previous IS NOT NULL THEN @previous END,
  client_key = CASE WHEN client_key IS NOT NULL THEN @client_key END
WHERE id = @id::uuid`

// Reseal rewrites the stored credentials in one transaction: it locks
// every endpoint (credentialsSQL FOR UPDATE), hands each one's credentials
// to f, and writes back those f changed (resealSQL). An error of f rolls
// everything back; so does dryRun, once every endpoint has been through f.
// It returns how many endpoints were (or, dryRun, would be) rewritten.
func (s *Store) Reseal(ctx context.Context, dryRun bool, f func(c *Credentials) (changed bool, err error)) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, credentialsSQL+` FOR UPDATE`)
		if err != nil {
			return err
		}
		all, err := pgx.CollectRows(rows, scanCredentials)
		if err != nil {
			return err
		}
		for i := range all {
			c := &all[i]
			changed, err := f(c)
			if err != nil {
				return err
			} else if !changed {
				continue
			}
			if _, err := tx.Exec(ctx, resealSQL, pgx.NamedArgs{"id": c.ID, "secret": c.Secret, "previous": c.Previous, "client_key": c.ClientKey}); err != nil {
				return err
			}
			n++
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return 0, err
	}
	return n, nil
}

// errDryRun rolls Reseal's transaction back.
var errDryRun = errors.New("dry run")

// clientCertsSQL reads the endpoints that have a client certificate, by
// name: the PEM chain, the sealed key and the leaf's expiry.
const clientCertsSQL = `SELECT id::text, name, client_cert, client_key, client_cert_not_after
FROM webhook_endpoints WHERE client_cert IS NOT NULL ORDER BY name`

// ClientCert is an endpoint's client certificate as stored.
type ClientCert struct {
	ID, Name string
	CertPEM  string // the certificate chain, leaf first
	Key      string // the private key's PEM, sealed
	NotAfter time.Time
}

// ClientCerts returns the endpoints' client certificates (clientCertsSQL).
func (s *Store) ClientCerts(ctx context.Context) ([]ClientCert, error) {
	rows, err := s.pool.Query(ctx, clientCertsSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClientCert, error) {
		var c ClientCert
		err := r.Scan(&c.ID, &c.Name, &c.CertPEM, &c.Key, &c.NotAfter)
		return c, err
	})
}
