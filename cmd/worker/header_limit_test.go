package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// hugeHeaderConsumer answers every request 200 with one header of n bytes,
// streamed over the hijacked connection from one shared buffer, so that the
// test process does not allocate n bytes per request. It counts requests.
func hugeHeaderConsumer(t *testing.T, n int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	chunk := bytes.Repeat([]byte{'h'}, 64<<10) // only ever read
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		conn, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, err = bw.WriteString("HTTP/1.1 200 OK\r\nX-Huge: ")
		for left := n; left > 0 && err == nil; left -= len(chunk) {
			_, err = bw.Write(chunk[:min(left, len(chunk))])
		}
		if err == nil { // the worker read it all: a 200, and no reuse of the hijacked connection
			_, _ = bw.WriteString("\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			_ = bw.Flush()
		}
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &requests
}

// peakRSS is the peak resident set of process pid (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// A hostile consumer answers each of 200 events with 8 MiB of response
// headers. A real worker process reads at most 64 KiB of them per response
// (WEBHOOK_MAX_RESPONSE_HEADER_BYTES's default): its peak RSS stays far
// below what 8 MiB per request in flight would take (about 1 GiB without
// the limit), and each attempt is a retryable failure of the consumer,
// recorded as such; every event is dead-lettered after its two attempts,
// none lost, none left in flight.
func TestHugeResponseHeadersBoundWorkerMemory(t *testing.T) {
	t.Parallel()
	const events, attempts, headerBytes = 200, 2, 8 << 20
	const rssLimit = 256 << 20
	db := testdb.New(t)
	srv, requests := hugeHeaderConsumer(t, headerBytes)
	p := startProcess(t, envFor(db.URL, nil, map[string]string{
		"WEBHOOK_URL": srv.URL, "WEBHOOK_SECRET": testSecret, "WEBHOOK_MAX_ATTEMPTS": strconv.Itoa(attempts),
	}))
	startedWorker(t, p.logs)
	payloads := make([]string, events)
	for i := range payloads {
		payloads[i] = fmt.Sprintf(`{"n": %d}`, i)
	}
	db.Insert(t, "e", payloads...)
	waitfor.True(t, 120*time.Second, "every event settled", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})

	peak := peakRSS(t, p.cmd.Process.Pid)
	figures(t, "%d events answered with 8 MiB of headers each: worker peak RSS %d MiB (VmHWM), %d requests, %d dead-lettered",
		events, peak>>20, requests.Load(), db.Count(t, "SELECT count(*) FROM webhook_dead_letter"))
	if peak >= rssLimit {
		t.Errorf("worker peak RSS %d MiB, want under %d MiB", peak>>20, rssLimit>>20)
	}
	const reason = "response headers exceeded 65536 bytes"
	if n := db.Count(t, "SELECT count(DISTINCT delivery_id) FROM webhook_dead_letter WHERE attempts = $1 AND last_status IS NULL AND last_error = $2",
		attempts, fmt.Sprintf("gave up after %d attempts: %s", attempts, reason)); n != events {
		t.Errorf("%d events dead-lettered for the headers after %d attempts, want %d", n, attempts, events)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_dead_letter"); n != events {
		t.Errorf("%d dead letters, want %d", n, events)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_attempts WHERE error_class = 'retryable' AND status IS NULL AND error = $1", reason); n != events*attempts {
		t.Errorf("%d attempts recorded as retryable %q, want %d", n, reason, events*attempts)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_attempts"); n != events*attempts || requests.Load() != events*attempts {
		t.Errorf("%d attempts recorded, the consumer saw %d requests, want %d", n, requests.Load(), events*attempts)
	}
}
