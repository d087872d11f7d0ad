package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// startWithFileLimit is startProcess under a file limit of n (soft and
// hard: Go raises the soft limit to the hard one at start).
func startWithFileLimit(t *testing.T, env map[string]string, n int) *process {
	t.Helper()
	return startCmd(t, exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, n), workerBinary(t)), env)
}

// hog opens connections to addr that hold on: every other one sends a
// whole request and then stays idle (keep-alive), the others send half
// their headers and nothing more. It opens first connections at once,
// then one more each tick until stop.
type hog struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func (h *hog) open(t *testing.T, i int) {
	c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		t.Errorf("dial %s: %v", h.addr, err)
		return
	}
	req := "GET /healthz HTTP/1.1\r\nHost: metrics\r\n\r\n"
	if i%2 == 1 {
		req = "GET /metrics HTTP/1.1\r\nHost: metrics\r\nX-Slow: "
	}
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, req)
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
}

func (h *hog) run(t *testing.T, first int, stop <-chan struct{}) {
	for i := range first {
		h.open(t, i)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := first; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
			h.open(t, i)
		}
	}
}

func (h *hog) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
}

// readyWithin says whether /readyz answers 200 within the client's
// timeout (a starved server never answers).
func readyWithin(base string) bool {
	c := &http.Client{Timeout: 3 * time.Second}
	res, err := c.Get(base + "/readyz")
	if err != nil {
		return false
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode == http.StatusOK
}

// A real worker under a file limit of 160 delivers every event, dead-
// letters none and answers /readyz while hundreds of connections to its
// metrics port stay idle after a request or send half their headers; the
// consumer closes every connection, so each delivery needs a new socket.
func TestMetricsPortCannotStarveDeliveries(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	c.srv.Config.SetKeepAlivesEnabled(false)
	p := startWithFileLimit(t, baseEnv(db, c, map[string]string{"WEBHOOK_MAX_ATTEMPTS": "2", "WEBHOOK_CONCURRENCY": "4"}), 160)
	base := startedWorker(t, p.logs)
	h := &hog{addr: strings.TrimPrefix(base, "http://")}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { h.run(t, 300, stop) })
	t.Cleanup(func() { close(stop); wg.Wait(); h.close() })
	// The first connections are open before the events are written.
	waitfor.True(t, 20*time.Second, "300 hogging connections open", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.conns) >= 300
	})
	const n = 40
	for i := range n {
		db.Insert(t, "stream.updated", fmt.Sprintf(`{"stream": %d}`, i))
	}
	waitfor.True(t, 20*time.Second, "/readyz answers beside the hogs", func() bool { return readyWithin(base) })
	waitfor.True(t, 60*time.Second, "every event processed", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed") >= n
	})
	if dl := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); dl != 0 {
		t.Fatalf("%d dead letters, want 0", dl)
	}
	deliveredOnceEach(t, c, n)
	if !readyWithin(base) {
		t.Fatal("/readyz does not answer after the deliveries")
	}
	if strings.Contains(p.logs.String(), "too many open files") {
		t.Fatal("the worker ran out of file descriptors")
	}
}

// With the database unreachable, /readyz says so in a few words: the
// user, database, host and port that pgx's error quotes go to the log,
// not to whoever asks.
func TestReadyzHidesConnectionDetails(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://readyz_user@127.0.0.1:1/readyz_db?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	logs := &syncBuffer{}
	h, err := newHealthServer("127.0.0.1:0", prometheus.NewRegistry(), pool.Ping, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	code, body := httpGet("http://" + h.Addr() + "/readyz")
	if code != http.StatusServiceUnavailable || strings.TrimSpace(body) != "not ready: database unreachable" {
		t.Fatalf("/readyz: %d %q, want 503 and \"not ready: database unreachable\"", code, body)
	}
	for _, detail := range []string{"readyz_user", "readyz_db", "127.0.0.1", ":1"} {
		if !strings.Contains(logs.String(), detail) {
			t.Errorf("the log does not tell %q: %s", detail, logs.String())
		}
	}
}
