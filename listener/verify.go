package listener

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// ProbeTimeoutDefault is how long the listener waits for its probe
// notification after Probe returns. A listening backend on a direct
// connection receives a committed NOTIFY within milliseconds.
const ProbeTimeoutDefault = 3 * time.Second

// ErrDeaf reports a LISTEN that was accepted but hears nothing: the
// connection goes through a pooler that hands each transaction to any
// server connection (PgBouncer in transaction mode), so the listening
// session is not the client's.
var ErrDeaf = errors.New("listener: LISTEN was accepted but hears nothing: the connection is pooled (PgBouncer in transaction mode?)")

// verify checks, after LISTEN on a new connection, that the connection
// hears: the channel is among pg_listening_channels(), and, with a Probe, a
// NOTIFY sent through another connection on a private channel arrives
// within ProbeTimeout. Notifications of the channel that arrive meanwhile
// wake the dispatcher as usual. It returns an error wrapping ErrDeaf when
// the connection is deaf, another error when the check itself failed.
//
// The first test alone is not enough behind PgBouncer in transaction mode:
// when the server connection that ran LISTEN is the one handed back for the
// next statement (PgBouncer reuses the latest), it reports the channel, yet
// nothing reaches the client while it is idle.
func (l *Listener) verify(ctx context.Context, conn *pgx.Conn) error {
	var chans []string
	if err := conn.QueryRow(ctx, "SELECT array(SELECT pg_listening_channels())").Scan(&chans); err != nil {
		return fmt.Errorf("listener: check LISTEN: %w", err)
	}
	if !slices.Contains(chans, l.cfg.Channel) {
		return fmt.Errorf("%w (pg_listening_channels() is empty right after LISTEN %s)", ErrDeaf, l.cfg.Channel)
	}
	if l.cfg.Probe == nil {
		return nil
	}
	probe := probeChannel()
	if _, err := conn.Exec(ctx, "LISTEN "+probe); err != nil {
		return fmt.Errorf("listener: LISTEN %s: %w", probe, err)
	}
	if err := l.cfg.Probe(ctx, probe); err != nil {
		return fmt.Errorf("listener: probe NOTIFY: %w", err)
	}
	if err := l.awaitProbe(ctx, conn, probe); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "UNLISTEN "+probe); err != nil {
		return fmt.Errorf("listener: UNLISTEN %s: %w", probe, err)
	}
	return nil
}

// awaitProbe waits ProbeTimeout for a notification on probe.
func (l *Listener) awaitProbe(ctx context.Context, conn *pgx.Conn, probe string) error {
	wctx, cancel := context.WithTimeout(ctx, l.cfg.ProbeTimeout)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		switch {
		case err != nil && ctx.Err() == nil && wctx.Err() != nil:
			return fmt.Errorf("%w (a NOTIFY sent through another connection did not arrive within %s)", ErrDeaf, l.cfg.ProbeTimeout)
		case err != nil:
			return fmt.Errorf("listener: wait for the probe: %w", err)
		case n.Channel == probe:
			return nil
		case n.Channel == l.cfg.Channel:
			l.metrics.notifications.Inc()
			l.signal()
		}
	}
}

// probeChannel is a channel name no other session listens on.
func probeChannel() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "fluxora_webhook_probe_" + hex.EncodeToString(b)
}
