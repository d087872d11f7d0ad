package capped_test

import (
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/capped"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// hogOnce opens a connection to addr that holds on: an even i sends a
// whole request and then stays idle (keep-alive), an odd one half its
// headers and nothing more. The test's end closes it.
func hogOnce(t *testing.T, addr string, i int) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := "GET /idle HTTP/1.1\r\nHost: x\r\n\r\n"
	if i%2 == 1 {
		req = "GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: "
	}
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, req)
}

// get is the status of a GET of url on a connection of its own (0 when it
// fails).
func get(url string) int {
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := c.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// At its cap the listener sheds idle and half-sent connections to serve a
// newcomer, never one serving a request, and never holds more than its
// cap open.
func TestCapListenerShedsIdleNotBusy(t *testing.T) {
	t.Parallel()
	const capacity = 4
	ln, err := capped.Listen("127.0.0.1:0", capacity)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var entered atomic.Int32
	srv := ln.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			entered.Add(1)
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}), capped.Timeouts{Header: time.Minute, Read: time.Minute, Write: time.Minute, Idle: time.Minute}, nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + ln.Addr().String()
	busy := make(chan int, 2)
	for range 2 {
		go func() { busy <- get(base + "/busy") }()
	}
	waitfor.True(t, 10*time.Second, "two requests being served", func() bool { return entered.Load() == 2 })
	for i := range 20 {
		hogOnce(t, ln.Addr().String(), i)
	}
	most := 0
	waitfor.True(t, 20*time.Second, "a newcomer served beside the hogs", func() bool {
		most = max(most, ln.Open())
		c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		res, err := c.Get(base + "/new")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	if most = max(most, ln.Open()); most > capacity {
		t.Fatalf("%d connections open, cap %d", most, capacity)
	}
	close(release)
	for range 2 {
		if code := <-busy; code != http.StatusOK {
			t.Fatalf("a request being served when the hogs came: %d, want 200 (shed while busy)", code)
		}
	}
}
