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

// The statements of queries/sealed.sql.
var (
	credentialsSQL     = rawStatement("credentials")
	lockCredentialsSQL = rawStatement("lock_credentials")
	resealSQL          = rawStatement("reseal")
	clientCertsSQL     = rawStatement("client_certs")
)

// Credentials are one endpoint's stored credentials, as the columns hold
// them.
type Credentials struct {
	ID        string `db:"id"`
	Name      string `db:"name"`
	Secret    string `db:"secret"`
	Previous  string `db:"previous"`   // "" for none
	ClientKey string `db:"client_key"` // "" for none
}

// Credentials returns every endpoint's stored credentials (credentials).
func (s *Store) Credentials(ctx context.Context) ([]Credentials, error) {
	rows, err := s.pool.Query(ctx, credentialsSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Credentials])
}

// Reseal rewrites the stored credentials in one transaction: it locks
// every endpoint (lock_credentials), hands each one's credentials to f,
// and writes back those f changed (reseal). An error of f rolls
// everything back; so does dryRun, once every endpoint has been through f.
// It returns how many endpoints were (or, dryRun, would be) rewritten.
func (s *Store) Reseal(ctx context.Context, dryRun bool, f func(c *Credentials) (changed bool, err error)) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, lockCredentialsSQL)
		if err != nil {
			return err
		}
		all, err := pgx.CollectRows(rows, pgx.RowToStructByName[Credentials])
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

// ClientCert is an endpoint's client certificate as stored.
type ClientCert struct {
	ID       string    `db:"id"`
	Name     string    `db:"name"`
	CertPEM  string    `db:"client_cert"` // the certificate chain, leaf first
	Key      string    `db:"client_key"`  // the private key's PEM, sealed
	NotAfter time.Time `db:"client_cert_not_after"`
}

// ClientCerts returns the endpoints' client certificates (client_certs).
func (s *Store) ClientCerts(ctx context.Context) ([]ClientCert, error) {
	rows, err := s.pool.Query(ctx, clientCertsSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[ClientCert])
}
