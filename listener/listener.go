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
//
// Drop closes the connection and connects again at once: the worker calls
// it when its pool finds the server read-only or going away (a failover),
// so that the listener leaves a node no producer writes to any more.
//
// Before that, it checks that the connection really hears (see Config.Probe):
// a LISTEN through PgBouncer in transaction mode is accepted and then hears
// nothing. Run returns ErrDeaf rather than run deaf.
package listener

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
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
	// through a transaction-pooling PgBouncer): Run returns ErrDeaf when
	// it is not.
	Connect func(ctx context.Context) (*pgx.Conn, error)
	// Probe sends a NOTIFY on the given channel through another connection
	// (the worker's pool). After every LISTEN the listener listens on a
	// private channel, calls Probe and waits ProbeTimeout for the
	// notification: a connection that does not hear it is deaf. Nil skips
	// this test; the pg_listening_channels() test is always made.
	Probe func(ctx context.Context, channel string) error
	// ProbeTimeout is how long the probe notification may take once Probe
	// has returned. Defaults to ProbeTimeoutDefault (3s).
	ProbeTimeout time.Duration
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
	ready     chan struct{} // closed at the first verified LISTEN
	readyOnce sync.Once
	deaf      context.CancelCauseFunc // ends Run with ErrDeaf; set by Run

	dropMu sync.Mutex
	drop   context.CancelFunc // ends the connection of the moment; set by Run
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
	cfg.ProbeTimeout = cmp.Or(cfg.ProbeTimeout, ProbeTimeoutDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	return &Listener{cfg: cfg, wake: make(chan struct{}, 1), metrics: newMetrics(cfg.Registerer), ready: make(chan struct{})}, nil
}

// Ready is closed once LISTEN is active and verified for the first time.
func (l *Listener) Ready() <-chan struct{} { return l.ready }

// Wake delivers one value whenever there may be new due rows.
func (l *Listener) Wake() <-chan struct{} { return l.wake }

// Connected reports whether LISTEN is active on a live connection.
func (l *Listener) Connected() bool { return l.connected.Load() }

// Run listens until ctx ends, reconnecting after every failure and at
// once after Drop. It returns nil when ctx is cancelled, and an error
// wrapping ErrDeaf as soon as a connection turns out deaf, at the start or
// after a reconnect.
func (l *Listener) Run(ctx context.Context) error {
	ctx, deaf := context.WithCancelCause(ctx)
	defer deaf(nil)
	l.deaf = deaf
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
	for {
		// One round per Drop: pgxlisten reconnects by itself after a
		// failure, but cannot be told to leave a connection that works.
		round, drop := context.WithCancel(ctx)
		l.setDrop(drop)
		err := pl.Listen(round)
		dropped := round.Err() != nil && ctx.Err() == nil
		drop()
		l.setConnected(false)
		if cause := context.Cause(ctx); errors.Is(cause, ErrDeaf) {
			return cause
		}
		if ctx.Err() != nil {
			return nil
		}
		if !dropped {
			return err
		}
	}
}

// Drop closes the listener's connection, if any, and has Run connect
// again at once, without waiting ReconnectDelay. It does not wait.
func (l *Listener) Drop() {
	l.dropMu.Lock()
	defer l.dropMu.Unlock()
	if l.drop != nil {
		l.setConnected(false)
		l.drop()
	}
}

func (l *Listener) setDrop(drop context.CancelFunc) {
	l.dropMu.Lock()
	defer l.dropMu.Unlock()
	l.drop = drop
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

// HandleBacklog runs after LISTEN on a new connection. Once the connection
// is verified, the listener is connected, and rows inserted meanwhile must
// be claimed. A deaf connection ends Run; a failed check closes the
// connection, and the listener reconnects.
func (h handler) HandleBacklog(ctx context.Context, _ string, conn *pgx.Conn) error {
	if err := h.l.verify(ctx, conn); err != nil {
		if errors.Is(err, ErrDeaf) {
			h.l.deaf(err)
		}
		_ = conn.Close(ctx)
		return err
	}
	h.l.setConnected(true)
	h.l.metrics.connects.Inc()
	h.l.readyOnce.Do(func() { close(h.l.ready) })
	h.l.signal()
	return nil
}
