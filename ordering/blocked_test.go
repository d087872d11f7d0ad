package ordering_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/ordering"
	"github.com/fluxora/webhook-worker/outbox"
)

var _ ordering.Store = (*outbox.Store)(nil)

// fakeStore answers BlockedKeys with its current list or error.
type fakeStore struct {
	mu    sync.Mutex
	list  []outbox.BlockedKeys
	err   error
	reads int
}

func (f *fakeStore) BlockedKeys(context.Context) ([]outbox.BlockedKeys, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.list, f.err
}

func (f *fakeStore) set(list []outbox.BlockedKeys, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list, f.err = list, err
}

func (f *fakeStore) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func setup(t *testing.T, every time.Duration) (*ordering.Blocked, *fakeStore, *prometheus.Registry) {
	t.Helper()
	st, reg := &fakeStore{}, prometheus.NewRegistry()
	b, err := ordering.New(ordering.Config{Store: st, Registerer: reg, Every: every})
	if err != nil {
		t.Fatal(err)
	}
	return b, st, reg
}

const gauges = `
# HELP fluxora_webhook_ordering_blocked_keys Ordering keys of each endpoint that cannot move now: their head's retry is later, or a dead letter holds them (read every 30 s; the same in every worker).
# TYPE fluxora_webhook_ordering_blocked_keys gauge
fluxora_webhook_ordering_blocked_keys{endpoint="shop"} 2
# HELP fluxora_webhook_ordering_blocked_oldest_seconds How long the longest blocked ordering key of each endpoint has waited, in seconds (read every 30 s).
# TYPE fluxora_webhook_ordering_blocked_oldest_seconds gauge
fluxora_webhook_ordering_blocked_oldest_seconds{endpoint="shop"} 12.5
`

// Each read replaces the gauges: an endpoint whose keys moved again loses
// its series; a failed read leaves them as they were.
func TestLoadReplacesTheGauges(t *testing.T) {
	t.Parallel()
	b, st, reg := setup(t, 0)
	ctx := context.Background()
	st.set([]outbox.BlockedKeys{{Endpoint: "billing", Keys: 1, OldestSecs: 3}}, nil)
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	st.set([]outbox.BlockedKeys{{Endpoint: "shop", Keys: 2, OldestSecs: 12.5}}, nil)
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(gauges)); err != nil {
		t.Fatal(err)
	}
	st.set(nil, errors.New("database unreachable"))
	if err := b.Load(ctx); err == nil {
		t.Fatal("a failed read returned no error")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(gauges)); err != nil {
		t.Fatalf("after a failed read: %v", err)
	}
}

// Run reads at once, then every Every, failed reads too, until ctx ends.
func TestRunReadsAtOnceAndOnItsPeriod(t *testing.T) {
	t.Parallel()
	b, st, reg := setup(t, 10*time.Millisecond)
	st.set([]outbox.BlockedKeys{{Endpoint: "shop", Keys: 2, OldestSecs: 12.5}}, errors.New("not yet"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	waitfor.True(t, 10*time.Second, "two reads", func() bool { return st.count() >= 2 })
	st.set([]outbox.BlockedKeys{{Endpoint: "shop", Keys: 2, OldestSecs: 12.5}}, nil)
	waitfor.True(t, 10*time.Second, "the gauges set", func() bool {
		return testutil.GatherAndCompare(reg, strings.NewReader(gauges)) == nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestNewNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  ordering.Config
		want string
	}{
		{ordering.Config{}, "Store"},
		{ordering.Config{Store: &fakeStore{}, Every: -time.Second}, "Every"},
	} {
		if _, err := ordering.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}
