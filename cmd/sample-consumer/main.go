// Command sample-consumer is a minimal Fluxora webhook consumer: it verifies
// each request with package verify, deduplicates by x-fluxora-delivery-id,
// and prints one line per event. The README demo uses it.
//
//	WEBHOOK_SECRET=... sample-consumer -addr 127.0.0.1:8089
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := getenv("WEBHOOK_SECRET")
	if secret == "" {
		return errors.New("WEBHOOK_SECRET is required")
	}
	h := &handler{v: &verify.Verifier{Secret: []byte(secret)}, seen: map[string]bool{}, out: out}
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
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ev, err := h.v.Verify(r)
	if err != nil {
		fmt.Fprintf(h.out, "rejected: %v\n", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	h.mu.Lock()
	dup := h.seen[ev.DeliveryID]
	h.seen[ev.DeliveryID] = true
	h.mu.Unlock()
	if dup {
		fmt.Fprintf(h.out, "duplicate %s ignored (attempt %d)\n", ev.DeliveryID, ev.Attempt)
	} else {
		fmt.Fprintf(h.out, "verified %s %s attempt=%d body=%s\n", ev.DeliveryID, ev.Type, ev.Attempt, ev.Body)
	}
	w.WriteHeader(http.StatusNoContent)
}
