package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/webhook"
)

func endpointRow(id, url string) webhook.Delivery {
	return webhook.Delivery{DeliveryID: "0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10", EventType: "e", Payload: []byte(`{}`), Attempt: 1,
		EndpointID: id, EndpointName: "ep-" + id, URL: url, Secret: testSecret}
}

// Endpoints cycling through (added, removed, disabled, or just more of them
// than the cache holds) keep the senders' cache at its cap, the most
// recently used kept; a changed endpoint replaces its own entry.
func TestSenderCacheStaysAtItsCap(t *testing.T) {
	t.Parallel()
	h := newHTTPSenders(nil, sender.Config{})
	t.Cleanup(h.Close)
	const url = "http://127.0.0.1:9/hook" // never dialled: forRow only builds senders
	for round := range 2 {
		for i := range 3 * sendersMax {
			if s, why := h.forRow(endpointRow(fmt.Sprint(i), url)); s == nil {
				t.Fatalf("round %d, endpoint %d: %s", round, i, why.err)
			}
		}
	}
	h.mu.Lock()
	n, l := len(h.per), h.lru.Len()
	_, newest := h.per[fmt.Sprint(3*sendersMax-1)]
	_, oldest := h.per["0"]
	h.mu.Unlock()
	if n != sendersMax || l != sendersMax || !newest || oldest {
		t.Fatalf("cache holds %d senders (list %d), newest kept %v, oldest kept %v; want %d, true, false", n, l, newest, oldest, sendersMax)
	}
	last := fmt.Sprint(3*sendersMax - 1)
	before, _ := h.forRow(endpointRow(last, url))
	after, _ := h.forRow(endpointRow(last, url+"/moved"))
	h.mu.Lock()
	n = len(h.per)
	h.mu.Unlock()
	if before == after || n != sendersMax {
		t.Fatalf("a changed URL: same sender %v, cache %d", before == after, n)
	}
}

// An evicted sender's idle connections are closed; a request it is making
// when evicted finishes and is delivered.
func TestSenderCacheEvictionClosesIdleNotInFlight(t *testing.T) {
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

	h := newHTTPSenders(nil, sender.Config{Timeout: time.Minute})
	t.Cleanup(h.Close)
	h.max = 2
	ctx := context.Background()
	if res := h.Send(ctx, endpointRow("idle", srv.URL+"/idle")); res.Class != webhook.Delivered {
		t.Fatalf("idle endpoint: %+v", res)
	}
	slow := make(chan webhook.Result, 1)
	go func() { slow <- h.Send(ctx, endpointRow("slow", srv.URL+"/slow")) }()
	<-entered
	for _, id := range []string{"c", "d", "e"} { // evicts idle, then slow
		h.forRow(endpointRow(id, srv.URL+"/other"))
	}
	h.mu.Lock()
	_, idleKept := h.per["idle"]
	_, slowKept := h.per["slow"]
	h.mu.Unlock()
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
