package eventtypes_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/eventtypes"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/webhook"
)

// fakeDB is a catalog's state and types, counting the loads.
type fakeDB struct {
	mu      sync.Mutex
	strict  bool
	version int64
	types   []webhook.EventType
	loads   int
	down    bool
}

func (f *fakeDB) state(context.Context) (bool, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, 0, errors.New("connection refused")
	}
	return f.strict, f.version, nil
}

func (f *fakeDB) load(context.Context) ([]webhook.EventType, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	return f.types, nil
}

func (f *fakeDB) set(fn func(f *fakeDB)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeDB) loadCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loads
}

func newLive(t *testing.T, f *fakeDB, every time.Duration) *eventtypes.Live {
	t.Helper()
	l, err := eventtypes.NewLive(eventtypes.LiveConfig{State: f.state, Load: f.load, Interval: every})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The types are loaded (and compiled) again only when the version moves;
// strict mode follows the state alone.
func TestLiveReloadsOnAVersionChange(t *testing.T) {
	t.Parallel()
	f := &fakeDB{version: 3, types: []webhook.EventType{{Name: "a"}}}
	l := newLive(t, f, time.Hour)
	ctx := context.Background()
	for range 3 {
		if err := l.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.loadCount(); n != 1 || !l.Catalog().Known("a") {
		t.Fatalf("%d loads, known a: %v", n, l.Catalog().Known("a"))
	}
	f.set(func(f *fakeDB) { f.strict = true })
	if err := l.Refresh(ctx); err != nil || f.loadCount() != 1 || !l.Catalog().Strict() {
		t.Fatalf("strict on: %v, %d loads, strict %v", err, f.loadCount(), l.Catalog().Strict())
	}
	f.set(func(f *fakeDB) { f.version, f.types = 4, []webhook.EventType{{Name: "b"}} })
	if err := l.Refresh(ctx); err != nil || f.loadCount() != 2 || l.Catalog().Known("a") || !l.Catalog().Known("b") {
		t.Fatalf("version 4: %v, %d loads, names %v", err, f.loadCount(), l.Catalog().Names())
	}
}

// A refusal is confirmed on the catalog as it is now: a type added since
// the last read passes; a catalog that cannot be read makes the check
// undecided (ErrUnavailable), never a refusal.
func TestLiveConfirmsRefusals(t *testing.T) {
	t.Parallel()
	f := &fakeDB{strict: true, version: 1, types: []webhook.EventType{{Name: "a"}}}
	l := newLive(t, f, time.Hour)
	ctx := context.Background()
	if err := l.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fakeDB) { f.version, f.types = 2, append(f.types, webhook.EventType{Name: "b"}) })
	if err := l.Check(ctx, "b", []byte(`{}`)); err != nil {
		t.Fatalf("a type added since the last read: %v", err)
	}
	if err := l.Check(ctx, "c", []byte(`{}`)); !errors.Is(err, eventtypes.ErrUnknownType) {
		t.Fatalf("an unknown type: %v", err)
	}
	f.set(func(f *fakeDB) { f.down = true })
	if err := l.Check(ctx, "c", []byte(`{}`)); !errors.Is(err, eventtypes.ErrUnavailable) {
		t.Fatalf("the catalog unreadable: %v, want ErrUnavailable", err)
	}
	if err := l.Check(ctx, "a", []byte(`{}`)); err != nil {
		t.Fatalf("a known type while the catalog is unreadable: %v", err)
	}
}

// Run reads the state every Interval until its context ends.
func TestLiveRun(t *testing.T) {
	t.Parallel()
	f := &fakeDB{version: 1}
	l := newLive(t, f, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	f.set(func(f *fakeDB) { f.version, f.types = 2, []webhook.EventType{{Name: "late"}} })
	waitfor.True(t, 10*time.Second, "the new type seen", func() bool { return l.Catalog().Known("late") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
