package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Operator events (queries/operator.sql; migration 025): the statements
// that write them besides the record and webhook_endpoint_disable.
var (
	consoleSettingSQL       = rawStatement("console_setting")
	endpointEnabledSQL      = rawStatement("endpoint_enabled")
	certificatesExpiringSQL = rawStatement("certificates_expiring")
)

// SetConsoleURL sets the console's base URL (WEBHOOK_CONSOLE_URL) that
// the operator events this Store writes carry as console_url; "" (the
// default) writes none. Call it before the Store is used.
func (s *Store) SetConsoleURL(u string) { s.consoleURL = u }

// setConsoleURL sets fluxora.console_url for the transaction tx, for
// webhook_endpoint_disable (console_setting).
func (s *Store) setConsoleURL(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, consoleSettingSQL, pgx.NamedArgs{"console_url": s.consoleURL})
	return err
}

// NoteExpiringCertificates writes fluxora.endpoint.certificate_expiring
// about each enabled endpoint whose client certificate expires within 14
// days, at most once a day each and only when an endpoint subscribes to
// it (certificates_expiring), and returns how many it wrote.
func (s *Store) NoteExpiringCertificates(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, certificatesExpiringSQL, pgx.NamedArgs{"console_url": s.consoleURL}).Scan(&n)
	return n, err
}
