// Package listener LISTENs for the outbox trigger's NOTIFY on a dedicated
// connection (through github.com/jackc/pgxlisten) and turns notifications
// into a wake signal.
//
// A notification is a hint, never the data: the handler only does a
// non-blocking send on a channel of capacity 1, so any number of
// notifications while the dispatcher is busy fold into one wake-up. After
// every (re)connect, once LISTEN is active, the listener wakes the dispatcher
// once more so that rows inserted while it was disconnected are claimed at
// once.
package listener

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	// ChannelDefault is the channel the outbox trigger notifies.
	ChannelDefault = "webhook_outbox"
	// ReconnectDelayDefault is the wait before reconnecting after the
	// connection is lost (pgxlisten's own default is one minute).
	ReconnectDelayDefault = 500 * time.Millisecond
)

// Config configures a Listener.
type Config struct {
	// Connect opens a connection for the listener's exclusive use; the
	// listener closes it. Required. It must be a direct connection (not
	// through a transaction-pooling PgBouncer).
	Connect func(ctx context.Context) (*pgx.Conn, error)
	// Channel to LISTEN on. Defaults to ChannelDefault.
	Channel string
	// ReconnectDelay is the wait before reconnecting. Defaults to
	// ReconnectDelayDefault (500ms).
	ReconnectDelay time.Duration
	// Logger receives connection errors. Defaults to discarding.
	Logger *slog.Logger
	// Registerer receives the listener's metrics. Required.
	Registerer prometheus.Registerer
}

// Listener listens for notifications and signals Wake.
type Listener struct {
	cfg       Config
	wake      chan struct{}
	connected atomic.Bool
	metrics   *metrics
}

// New returns a Listener or an error naming the missing field.
func New(cfg Config) (*Listener, error) {
	if cfg.Connect == nil {
		return nil, errors.New("listener: Connect is required")
	}
	if cfg.Registerer == nil {
		return nil, errors.New("listener: Registerer is required")
	}
	cfg.Channel = cmp.Or(cfg.Channel, ChannelDefault)
	cfg.ReconnectDelay = cmp.Or(cfg.ReconnectDelay, ReconnectDelayDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return &Listener{cfg: cfg, wake: make(chan struct{}, 1), metrics: newMetrics(cfg.Registerer)}, nil
}

// Wake delivers one value whenever there may be new due rows.
func (l *Listener) Wake() <-chan struct{} { return l.wake }

// Connected reports whether LISTEN is active on a live connection.
func (l *Listener) Connected() bool { return l.connected.Load() }

// Run listens until ctx ends, reconnecting after every failure. It returns
// nil when ctx is cancelled.
func (l *Listener) Run(ctx context.Context) error {
	pl := &pgxlisten.Listener{
		Connect: func(ctx context.Context) (*pgx.Conn, error) {
			l.setConnected(false)
			return l.cfg.Connect(ctx)
		},
		LogError: func(ctx context.Context, err error) {
			l.setConnected(false)
			if ctx.Err() == nil {
				l.metrics.errors.Inc()
				l.cfg.Logger.Warn("listener: connection lost; reconnecting", "error", err, "reconnect_delay", l.cfg.ReconnectDelay)
			}
		},
		ReconnectDelay: l.cfg.ReconnectDelay,
	}
	pl.Handle(l.cfg.Channel, handler{l})
	err := pl.Listen(ctx)
	l.setConnected(false)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (l *Listener) setConnected(v bool) {
	l.connected.Store(v)
	if v {
		l.metrics.connected.Set(1)
	} else {
		l.metrics.connected.Set(0)
	}
}

func (l *Listener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// handler is the pgxlisten handler: it runs on the listener's goroutine and
// does nothing but signal.
type handler struct{ l *Listener }

func (h handler) HandleNotification(context.Context, *pgconn.Notification, *pgx.Conn) error {
	h.l.metrics.notifications.Inc()
	h.l.signal()
	return nil
}

// HandleBacklog runs after LISTEN is active on a new connection: the
// listener is now connected, and rows inserted meanwhile must be claimed.
func (h handler) HandleBacklog(context.Context, string, *pgx.Conn) error {
	h.l.setConnected(true)
	h.l.metrics.connects.Inc()
	h.l.signal()
	return nil
}
