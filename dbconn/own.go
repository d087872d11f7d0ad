package dbconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
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
// noticed in about 20s.
func Connect(base *pgx.ConnConfig, applicationName string) func(context.Context) (*pgx.Conn, error) {
	return func(ctx context.Context) (*pgx.Conn, error) {
		cc := base.Copy()
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3,
		}}
		cc.DialFunc = d.DialContext
		cc.RuntimeParams["application_name"] = applicationName
		return pgx.ConnectConfig(ctx, cc)
	}
}

// NotifyProbe is the listener's Probe: a NOTIFY through the pool, which
// the listener must hear (a pooler in transaction mode would leave it
// deaf).
func NotifyProbe(pool *pgxpool.Pool) func(context.Context, string) error {
	return func(ctx context.Context, channel string) error {
		_, err := pool.Exec(ctx, "SELECT pg_notify($1, '')", channel)
		return err
	}
}
