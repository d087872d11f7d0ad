package dbconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ListenBase is the base of the connections of the worker's own (the
// listener's, the hush's): listenURL (WEBHOOK_LISTEN_DATABASE_URL), parsed
// and checked to answer, so that a wrong one fails the start.
func ListenBase(ctx context.Context, listenURL string) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(listenURL)
	if err != nil {
		return nil, errors.New("WEBHOOK_LISTEN_DATABASE_URL is not a valid PostgreSQL connection string")
	}
	conn, err := Connect(cc, "fluxora-webhook-listener")(ctx)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOK_LISTEN_DATABASE_URL: database unreachable: %w", err)
	}
	_ = conn.Close(ctx)
	return cc, nil
}

// Connect opens a connection outside the pool (the listener's, the
// hush's) as applicationName with TCP keepalives, so that a dead peer is
// noticed in about 20s. It takes only a server that takes writes, as
// target_session_attrs=read-write does (which the URL may also say): the
// next of the URL's hosts, or an error, rather than a standby or a
// demoted primary, where the listener would LISTEN to a node no producer
// writes to any more.
func Connect(base *pgx.ConnConfig, applicationName string) func(context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		cc := base.Copy()
		if cc.ValidateConnect == nil {
			cc.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
		}
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3,
		}}
		cc.DialFunc = d.DialContext
		cc.RuntimeParams["application_name"] = applicationName
		return pgx.ConnectConfig(ctx, cc)
	}
}

// probeSQL notifies, and says whether the session may write.
const probeSQL = `SELECT current_setting('transaction_read_only') = 'off', pg_notify($1, '')`

// NotifyProbe is the listener's Probe: a NOTIFY through the pool, which
// the listener must hear (a pooler in transaction mode would leave it
// deaf). A pool's connection that takes no writes fails the probe
// (ErrReadOnly) rather than notify from a node the listener, which only
// connects to one that takes writes, cannot hear: mid-failover, that
// would pass for deafness and stop the worker.
func NotifyProbe(pool *pgxpool.Pool) func(context.Context, string) error {
	return func(ctx context.Context, channel string) error {
		var writable bool
		if err := pool.QueryRow(ctx, probeSQL, channel).Scan(&writable, nil); err != nil {
			return err
		}
		if !writable {
			return ErrReadOnly
		}
		return nil
	}
}
