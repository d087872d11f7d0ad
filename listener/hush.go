package listener

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// The outbox trigger notifies only when its transaction can take the
// exclusive transaction-scoped advisory lock on this key
// (sql/triggers/notify.sql). A busy worker holds it shared, so producers
// skip a NOTIFY that would only wake a worker that is about to claim anyway.
const (
	holdSQL    = "SELECT pg_advisory_lock_shared(hashtext('fluxora_webhook'), 1)"
	releaseSQL = "SELECT pg_advisory_unlock_shared(hashtext('fluxora_webhook'), 1)"
)

// helpSQL notifies. Its own lock_timeout (the Hush's Timeout, in the implicit
// transaction of the two statements) replaces HushLockWait: a NOTIFY queues
// for the database-wide notify lock behind every other notifying commit,
// which under load takes longer than HushLockWait.
func helpSQL(timeout time.Duration) string {
	return "SET LOCAL lock_timeout = " + strconv.FormatInt(timeout.Milliseconds(), 10) + "; NOTIFY " + ChannelDefault
}

// HushTimeoutDefault bounds each Hold and Release round trip.
const HushTimeoutDefault = time.Second

// HushLockWait is how long Hold queues for the lock behind a producer that
// is notifying right now (lock_timeout on the Hush's connection). While it
// queues, producers' try-locks fail as well.
const HushLockWait = 20 * time.Millisecond

// HushHelpInterval is the least time between two Help notifications.
const HushHelpInterval = 20 * time.Millisecond

// A held lock is touched every hushKeepAlive; the server ends the Hush's
// session (and so releases the lock) after hushIdleTimeout without a query,
// so a frozen worker (SIGSTOP, a debugger) cannot silence producers for
// longer than that. Needs PostgreSQL 14 (idle_session_timeout).
const (
	hushKeepAlive   = time.Second
	hushIdleTimeout = 5 * time.Second
)

// HushConfig configures a Hush.
type HushConfig struct {
	// Connect opens the Hush's own connection (a session-level lock cannot
	// live on a pooled connection). Required.
	Connect func(ctx context.Context) (*pgx.Conn, error)
	// Timeout bounds each round trip. Defaults to HushTimeoutDefault (1s).
	Timeout time.Duration
	// Registerer receives fluxora_webhook_notify_hushed. Required.
	Registerer prometheus.Registerer
}

// Hush silences producers' NOTIFYs while a worker is busy.
//
// Each NOTIFY costs producers: the notifying commit takes a database-wide
// lock, and every notification signals the listening backends and wakes the
// worker. Under a steady stream the worker claims again within a millisecond
// of each non-empty claim anyway, so while it is in that state it holds the
// trigger's advisory lock shared, and no producer notifies. When a claim
// comes back empty it releases the lock and looks again after 1, 4, 16, 64
// and 256 ms, which also finds the rows of producers that skipped their
// NOTIFY just before the release. A busy worker that is saturated calls
// Help: the Hush then notifies itself (at most every HushHelpInterval), so
// that other workers wake and share the backlog as they would without it.
//
// Set records what the dispatcher wants without waiting; Run, on its own
// goroutine, takes or releases the lock. Any error closes the connection,
// which releases the lock on the server: not holding is always safe.
type Hush struct {
	cfg     HushConfig
	helpSQL string // helpSQL(cfg.Timeout)
	want    chan bool
	help    chan struct{}
	drop    chan struct{}
	helped  time.Time
	conn    *pgx.Conn
	used    time.Time // last successful round trip on conn
	held    bool
	hushed  prometheus.Gauge
}

// NewHush returns a Hush or an error naming the missing field.
func NewHush(cfg HushConfig) (*Hush, error) {
	if cfg.Connect == nil {
		return nil, errors.New("listener: HushConfig.Connect is required")
	}
	if cfg.Registerer == nil {
		return nil, errors.New("listener: HushConfig.Registerer is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = HushTimeoutDefault
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fluxora_webhook_notify_hushed",
		Help: "1 while this worker is busy and holds producers' NOTIFYs back (it claims again within milliseconds).",
	})
	if err := cfg.Registerer.Register(g); err != nil {
		return nil, err
	}
	return &Hush{cfg: cfg, helpSQL: helpSQL(cfg.Timeout), want: make(chan bool, 1), help: make(chan struct{}, 1),
		drop: make(chan struct{}, 1), hushed: g}, nil
}

// Set asks for the lock to be held (busy) or released, without waiting; the
// latest call wins. Only one goroutine may call Set.
func (h *Hush) Set(busy bool) {
	select {
	case <-h.want:
	default:
	}
	h.want <- busy
}

// Help asks for one NOTIFY, without waiting, if the lock is held and none
// was sent in the last HushHelpInterval.
func (h *Hush) Help() {
	select {
	case h.help <- struct{}{}:
	default:
	}
}

// Drop closes the Hush's connection, without waiting: the worker calls it
// when its pool finds the server read-only or going away (a failover).
// The lock is taken again, on a connection to a server that takes writes,
// the next time Set asks for it.
func (h *Hush) Drop() {
	select {
	case h.drop <- struct{}{}:
	default:
	}
}

// Run takes and releases the lock as Set asks until ctx ends, then closes
// the connection (releasing the lock). It returns nil.
func (h *Hush) Run(ctx context.Context) error {
	defer h.close()
	keepAlive := time.NewTicker(hushKeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-keepAlive.C:
			switch {
			case h.held:
				h.exec(ctx, "SELECT 1")
			case h.conn != nil && time.Since(h.used) > hushIdleTimeout-2*hushKeepAlive:
				h.close() // before the server does, and logs it
			}
		case busy := <-h.want:
			if busy {
				h.hold(ctx)
			} else {
				h.release(ctx)
			}
		case <-h.drop:
			h.close()
		case <-h.help:
			if h.held && time.Since(h.helped) >= HushHelpInterval {
				h.helped = time.Now()
				h.exec(ctx, h.helpSQL)
			}
		}
	}
}

func (h *Hush) hold(ctx context.Context) {
	if h.held {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	if h.conn == nil {
		c, err := h.cfg.Connect(ctx)
		if err != nil {
			return
		}
		if _, err := c.Exec(ctx, "SET lock_timeout = "+strconv.FormatInt(HushLockWait.Milliseconds(), 10)); err != nil {
			_ = c.Close(ctx)
			return
		}
		// Best effort: PostgreSQL before 14 has no idle_session_timeout.
		_, _ = c.Exec(ctx, "SET idle_session_timeout = "+strconv.FormatInt(hushIdleTimeout.Milliseconds(), 10))
		h.conn = c
	}
	if _, err := h.conn.Exec(ctx, holdSQL); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" { // lock_not_available: try again next time
			h.close()
		}
		return
	}
	h.set(true)
}

// exec runs sql on the held lock's connection; an error closes it.
func (h *Hush) exec(ctx context.Context, sql string) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	if _, err := h.conn.Exec(ctx, sql); err != nil {
		h.close()
	}
}

func (h *Hush) release(ctx context.Context) {
	if !h.held {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	var ok bool
	if err := h.conn.QueryRow(ctx, releaseSQL).Scan(&ok); err != nil || !ok {
		h.close() // the session ends, and with it the lock
		return
	}
	h.set(false)
}

func (h *Hush) close() {
	if h.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Timeout)
		_ = h.conn.Close(ctx)
		cancel()
		h.conn = nil
	}
	h.set(false)
}

func (h *Hush) set(held bool) {
	h.used = time.Now()
	h.held = held
	if held {
		h.hushed.Set(1)
	} else {
		h.hushed.Set(0)
	}
}
