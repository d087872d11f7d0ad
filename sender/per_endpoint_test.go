package sender

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/webhook"
)

func endpointDelivery(id, url string) webhook.Delivery {
	return webhook.Delivery{DeliveryID: "0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10", EventType: "e", Payload: []byte(`{}`), Attempt: 1,
		EndpointID: id, EndpointName: "ep-" + id, URL: url, Secret: "whsec_per_endpoint"}
}

func newPerEndpoint(t *testing.T, cfg PerEndpointConfig) *PerEndpoint {
	t.Helper()
	p, err := NewPerEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Endpoints cycling through (added, removed, disabled, or just more of them
// than the cache holds) keep the senders' cache at its cap, the most
// recently used kept; a changed endpoint replaces its own entry.
func TestPerEndpointStaysAtItsCap(t *testing.T) {
	t.Parallel()
	p := newPerEndpoint(t, PerEndpointConfig{})
	const url = "http://127.0.0.1:9/hook" // never dialled: forDelivery only builds senders
	for round := range 2 {
		for i := range 3 * PerEndpointMaxDefault {
			if s, why := p.forDelivery(endpointDelivery(fmt.Sprint(i), url)); s == nil {
				t.Fatalf("round %d, endpoint %d: %s", round, i, why.err)
			}
		}
	}
	p.mu.Lock()
	n, l := len(p.per), p.lru.Len()
	_, newest := p.per[fmt.Sprint(3*PerEndpointMaxDefault-1)]
	_, oldest := p.per["0"]
	p.mu.Unlock()
	if n != PerEndpointMaxDefault || l != PerEndpointMaxDefault || !newest || oldest {
		t.Fatalf("cache holds %d senders (list %d), newest kept %v, oldest kept %v; want %d, true, false", n, l, newest, oldest, PerEndpointMaxDefault)
	}
	last := fmt.Sprint(3*PerEndpointMaxDefault - 1)
	before, _ := p.forDelivery(endpointDelivery(last, url))
	after, _ := p.forDelivery(endpointDelivery(last, url+"/moved"))
	p.mu.Lock()
	n = len(p.per)
	p.mu.Unlock()
	if before == after || n != PerEndpointMaxDefault {
		t.Fatalf("a changed URL: same sender %v, cache %d", before == after, n)
	}
}

// An evicted sender's idle connections are closed; a request it is making
// when evicted finishes and is delivered.
func TestPerEndpointEvictionClosesIdleNotInFlight(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	idleConn := ""              // remote address of the /idle request's connection
	closed := map[string]bool{} // remote addresses of closed connections
	entered, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/idle":
			mu.Lock()
			idleConn = r.RemoteAddr
			mu.Unlock()
		case "/slow":
			close(entered)
			<-release
		}
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			mu.Lock()
			closed[c.RemoteAddr().String()] = true
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before srv.Close, which waits for the handler

	p := newPerEndpoint(t, PerEndpointConfig{Base: Config{Timeout: time.Minute}, Max: 2})
	ctx := context.Background()
	if res := p.Send(ctx, endpointDelivery("idle", srv.URL+"/idle")); res.Class != webhook.Delivered {
		t.Fatalf("idle endpoint: %+v", res)
	}
	slow := make(chan webhook.Result, 1)
	go func() { slow <- p.Send(ctx, endpointDelivery("slow", srv.URL+"/slow")) }()
	<-entered
	for _, id := range []string{"c", "d", "e"} { // evicts idle, then slow
		p.forDelivery(endpointDelivery(id, srv.URL+"/other"))
	}
	p.mu.Lock()
	_, idleKept := p.per["idle"]
	_, slowKept := p.per["slow"]
	p.mu.Unlock()
	if idleKept || slowKept {
		t.Fatalf("after three more endpoints with a cap of 2: idle kept %v, slow kept %v", idleKept, slowKept)
	}
	waitfor.True(t, 10*time.Second, "the evicted sender's idle connection closed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return closed[idleConn]
	})
	unblock()
	if res := <-slow; res.Class != webhook.Delivered || res.Status != http.StatusOK {
		t.Fatalf("the request in flight at eviction: %+v", res)
	}
}

// watch records what a PerEndpoint tells of its endpoints' secrets.
type watch struct {
	mu                   sync.Mutex
	unreadable, readable []string // endpoint ids, in order
	why                  string
}

func (w *watch) SecretUnreadable(_ context.Context, d webhook.Delivery, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unreadable, w.why = append(w.unreadable, d.EndpointID), why
}

func (w *watch) SecretReadable(_ context.Context, d webhook.Delivery) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.readable = append(w.readable, d.EndpointID)
}

// A secret that does not open is not attempted (never sent unsigned) and
// told, its reason naming the endpoint; one that opens is told once per
// sender made; without a WEBHOOK_URL endpoint its deliveries are
// Permanent.
func TestPerEndpointSecrets(t *testing.T) {
	t.Parallel()
	var hits sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { hits.Store(r.URL.Path, true) }))
	t.Cleanup(srv.Close)
	w := &watch{}
	p := newPerEndpoint(t, PerEndpointConfig{Secrets: w, OpenSecret: func(id, stored string) ([]byte, error) {
		if id == "sealed" {
			return nil, fmt.Errorf("sealed with key id %q: missing", "k9")
		}
		return []byte(stored), nil
	}})
	ctx := context.Background()
	res := p.Send(ctx, endpointDelivery("sealed", srv.URL+"/sealed"))
	if res.Class != webhook.NotAttempted || res.Error != `endpoint ep-sealed: its secret cannot be opened: sealed with key id "k9": missing` {
		t.Fatalf("a secret that does not open: %+v", res)
	}
	for range 2 {
		if res := p.Send(ctx, endpointDelivery("open", srv.URL+"/open")); res.Class != webhook.Delivered {
			t.Fatalf("a secret that opens: %+v", res)
		}
	}
	if _, sent := hits.Load("/sealed"); sent {
		t.Fatal("the delivery whose secret does not open was sent")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if fmt.Sprint(w.unreadable, w.readable) != "[sealed] [open]" || w.why != `its secret cannot be opened: sealed with key id "k9": missing` {
		t.Fatalf("told unreadable %v (%q), readable %v", w.unreadable, w.why, w.readable)
	}
	if res := p.Send(ctx, webhook.Delivery{DeliveryID: "0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10", EventType: "e", Attempt: 1}); res.Class != webhook.Permanent ||
		res.Error != "no WEBHOOK_URL endpoint configured" {
		t.Fatalf("no WEBHOOK_URL endpoint: %+v", res)
	}
	if _, err := NewPerEndpoint(PerEndpointConfig{Max: -1}); err == nil || !strings.Contains(err.Error(), "Max") {
		t.Fatalf("a negative Max: %v", err)
	}
}
