// Command sample-consumer is a minimal Fluxora webhook consumer: it verifies
// each request with package verify, deduplicates by x-fluxora-delivery-id,
// and prints one line per event (with its ordering key and sequence, when
// it has one). The README demo uses it. With -honor-delay it answers an
// event whose payload has "delay_ms" only after that long (at most 10 s),
// as a slow real consumer would, and fails the first attempt of an event
// whose payload has "fail_first": true (503), as a flaky one would.
//
//	WEBHOOK_SECRET=... sample-consumer -addr 127.0.0.1:8089 [-honor-delay]
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxora/webhook-worker/verify"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sample-consumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("sample-consumer", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "address to listen on")
	honorDelay := fs.Bool("honor-delay", false, `answer an event whose payload has "delay_ms" after that long (at most 10s)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := getenv("WEBHOOK_SECRET")
	if secret == "" {
		return errors.New("WEBHOOK_SECRET is required")
	}
	h := &handler{v: &verify.Verifier{Secret: []byte(secret)}, seen: map[string]bool{}, out: out, honorDelay: *honorDelay}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	context.AfterFunc(ctx, func() { _ = srv.Shutdown(context.Background()) })
	fmt.Fprintf(out, "sample-consumer: listening on http://%s\n", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handler verifies, deduplicates and prints.
type handler struct {
	v    *verify.Verifier
	mu   sync.Mutex
	seen map[string]bool // a real consumer keeps this in its database
	out  io.Writer
	// honorDelay: wait the payload's delay_ms before answering.
	honorDelay bool
}

// maxDelay caps the delay_ms a payload may ask for.
const maxDelay = 10 * time.Second

// asks is what a payload asks of the consumer.
type asks struct {
	DelayMS   int64 `json:"delay_ms"`
	FailFirst bool  `json:"fail_first"`
}

// delay is the payload's delay_ms, capped, or 0.
func delay(body []byte) time.Duration {
	var p asks
	if json.Unmarshal(body, &p) != nil || p.DelayMS <= 0 {
		return 0
	}
	return min(time.Duration(p.DelayMS)*time.Millisecond, maxDelay)
}

// failFirst reports whether the payload asks its first attempt to fail.
func failFirst(body []byte) bool {
	var p asks
	return json.Unmarshal(body, &p) == nil && p.FailFirst
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ev, err := h.v.Verify(r)
	if err != nil {
		fmt.Fprintf(h.out, "rejected: %v\n", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	ordered := ""
	if ev.OrderingKey != "" {
		ordered = fmt.Sprintf(" key=%s seq=%d", ev.OrderingKey, ev.Sequence)
	}
	if h.honorDelay && ev.Attempt == 1 && failFirst(ev.Body) {
		fmt.Fprintf(h.out, "failed %s on purpose (attempt 1)%s\n", ev.DeliveryID, ordered)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	dup := h.seen[ev.DeliveryID]
	h.seen[ev.DeliveryID] = true
	h.mu.Unlock()
	if dup {
		fmt.Fprintf(h.out, "duplicate %s ignored (attempt %d)\n", ev.DeliveryID, ev.Attempt)
	} else {
		// webhook-signature holds two signatures during a secret rotation;
		// traceparent is one of an event's own headers, when it has one.
		fmt.Fprintf(h.out, "verified %s %s endpoint=%s attempt=%d signatures=%d traceparent=%s%s body=%s\n", ev.DeliveryID, ev.Type,
			cmp.Or(r.Header.Get("x-fluxora-endpoint"), "-"), ev.Attempt, len(strings.Fields(r.Header.Get("webhook-signature"))),
			cmp.Or(r.Header.Get("traceparent"), "-"), ordered, ev.Body)
	}
	if d := delay(ev.Body); h.honorDelay && d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		fmt.Fprintf(h.out, "answered %s after %v\n", ev.DeliveryID, d)
	}
	w.WriteHeader(http.StatusNoContent)
}
