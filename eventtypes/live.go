package eventtypes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// IntervalDefault is how often Live reads the catalog's state by default.
const IntervalDefault = time.Second

// LiveConfig configures a Live.
type LiveConfig struct {
	// State reads strict mode and the catalog's version (one row of
	// webhook_event_catalog). Required.
	State func(ctx context.Context) (strict bool, version int64, err error)
	// Load reads every type (webhook_event_types). Required.
	Load func(ctx context.Context) ([]webhook.EventType, error)
	// Interval is how often Run reads State. Defaults to 1s
	// (IntervalDefault).
	Interval time.Duration
	// Logger receives the schemas that do not compile and the failed
	// reads. Defaults to discarding.
	Logger *slog.Logger
}

// Live is the worker's catalog, kept current: Run reads the state every
// Interval and loads and compiles the types again only when the version
// changed. Check refuses only after making sure the catalog it refuses by
// is current, so that a type added a moment ago is never refused by a
// worker that has not seen it yet.
type Live struct {
	cfg    LiveConfig
	log    *slog.Logger
	cur    atomic.Pointer[Catalog]
	mu     sync.Mutex    // one refresh at a time
	loaded bool          // the types were read once (under mu)
	gen    atomic.Uint64 // refreshes begun
}

// NewLive returns a Live holding the empty catalog until its first
// Refresh, or an error naming the missing field.
func NewLive(cfg LiveConfig) (*Live, error) {
	if cfg.State == nil || cfg.Load == nil {
		return nil, errors.New("eventtypes: State and Load are required")
	}
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	l := &Live{cfg: cfg, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))}
	l.cur.Store(Empty())
	return l, nil
}

// Catalog is the catalog as last read.
func (l *Live) Catalog() *Catalog { return l.cur.Load() }

// Run refreshes the catalog every Interval until ctx ends; a failed read
// is logged and tried again at the next tick.
func (l *Live) Run(ctx context.Context) error {
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := l.Refresh(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("event types: reading the catalog failed", "error", err)
			}
		}
	}
}

// Refresh reads the state and, when the version changed, the types.
func (l *Live) Refresh(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refresh(ctx)
}

// refresh runs under mu. It counts itself before it reads (gen), so that
// a check that saw the count before it can rely on its read as one made
// after the check began.
func (l *Live) refresh(ctx context.Context) error {
	l.gen.Add(1)
	strict, version, err := l.cfg.State(ctx)
	if err != nil {
		return fmt.Errorf("event catalog state: %w", err)
	}
	cur := l.cur.Load()
	if l.loaded && version == cur.version {
		if strict != cur.strict {
			l.cur.Store(cur.withStrict(strict))
		}
		return nil
	}
	types, err := l.cfg.Load(ctx)
	if err != nil {
		return fmt.Errorf("event catalog: %w", err)
	}
	next := New(types, strict, version)
	for name, err := range next.Broken() {
		l.log.Error("event types: a schema does not compile; its deliveries wait", "event_type", name, "error", err)
	}
	l.cur.Store(next)
	l.loaded = true
	return nil
}

// withStrict is c with strict mode set to strict (the types shared).
func (c *Catalog) withStrict(strict bool) *Catalog {
	n := *c
	n.strict = strict
	return &n
}

// Check is Catalog.Check on the current catalog. A refusal is confirmed
// on the catalog as it is now (Refresh, unless a refresh began since this
// check did, and so read after it): a payload it still refuses returns
// the refusal; a catalog that cannot be read returns an error wrapping
// ErrUnavailable.
func (l *Live) Check(ctx context.Context, eventType string, payload []byte) error {
	gen := l.gen.Load()
	err := l.cur.Load().Check(eventType, payload)
	if err == nil {
		return nil
	}
	l.mu.Lock()
	if l.gen.Load() == gen {
		if rerr := l.refresh(ctx); rerr != nil {
			l.mu.Unlock()
			return fmt.Errorf("%w: %w", ErrUnavailable, rerr)
		}
	}
	l.mu.Unlock()
	return l.cur.Load().Check(eventType, payload)
}

// ErrUnavailable: the catalog could not be read to confirm a refusal.
var ErrUnavailable = errors.New("the event catalog could not be read")
