package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// pausedRedis is a Redis that accepts connections and reads commands but
// never answers (a paused server, SIGSTOP, or a black-holed peer after the
// handshake); it counts the connections made to it, and sends on held how
// long the client held each before closing it.
func pausedRedis(t *testing.T) (url string, conns *atomic.Int64, held chan time.Duration) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	conns, held = new(atomic.Int64), make(chan time.Duration, 100)
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			go func(start time.Time) {
				_, _ = io.Copy(io.Discard, c)
				held <- time.Since(start)
			}(time.Now())
		}
	}()
	return "redis://" + ln.Addr().String(), conns, held
}

// worker status reads circuit states through the worker's bounded Redis
// client: against a paused Redis each read is one call, never retried,
// given up at its deadline (opsRedisTimeout; before, the client ignored the
// deadline and held each call for go-redis's own timeouts), and reported
// unknown.
func TestStatusWithAPausedRedisCallsOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	redisURL, conns, held := pausedRedis(t)
	var s outboxStatus
	env := map[string]string{"DATABASE_URL": db.URL, "REDIS_URL": redisURL, "WEBHOOK_URL": "https://hooks.example.com/fluxora"}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"status", "--json"}, func(k string) string { return env[k] }, &stdout, &stderr)
	out, errs := stdout.String(), stderr.String()
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Circuit == nil || s.Circuit.Error != "redis unreachable" || len(s.Endpoints) != 1 ||
		s.Endpoints[0].Circuit != "unknown (redis unreachable)" {
		t.Fatalf("circuit %+v, endpoints %+v", s.Circuit, s.Endpoints)
	}
	// Two reads (the WEBHOOK_URL circuit, then the default endpoint's).
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections to the paused Redis for two circuit reads: want one each, no retry", n)
	}
	// The client gives up on the call, and its connection, at the deadline;
	// the slack is only for scheduling, far below go-redis's own 3 s.
	for range 2 {
		select {
		case d := <-held:
			t.Logf("connection held %v", d)
			if d > opsRedisTimeout+time.Second {
				t.Errorf("a circuit read held its connection %v, past its %v deadline", d, opsRedisTimeout)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a connection to the paused Redis is still open after the command")
		}
	}
}
