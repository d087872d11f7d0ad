package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/webhook"
)

// secretMarkEvery is how often, at most, a worker that cannot open an
// endpoint's secret says so again (its log line and the endpoint's mark,
// secret_unreadable_at): about once a deferral (dispatcher.NotAttemptedDelay),
// whatever the number of rows deferred.
const secretMarkEvery = time.Minute

// secretWatch tells of the endpoints' secrets this worker cannot open
// (sealed under a key its key file, read at start, does not hold: a key
// removed from the file, or a secret stored since under a new key): the
// gauge fluxora_webhook_endpoint_secret_unreadable, a warning, and the
// endpoint's mark in the table, which `worker status` and the console
// show. The worker records it rather than the commands opening the
// secrets themselves: the commands' key file is not the worker's (a key
// added to the file since the worker started opens the secret for them,
// not for the worker), so only the worker knows. It clears its mark when
// it opens that endpoint's secret again; a worker that starts clears
// every mark (checkCredentials: it opened every credential).
type secretWatch struct {
	store *outbox.Store
	log   *slog.Logger
	gauge *prometheus.GaugeVec
	now   func() time.Time

	mu     sync.Mutex
	marked map[string]time.Time // endpoint id: when this worker last marked it
}

func newSecretWatch(store *outbox.Store, log *slog.Logger, reg prometheus.Registerer) *secretWatch {
	return &secretWatch{store: store, log: log, now: time.Now, marked: map[string]time.Time{},
		gauge: promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_endpoint_secret_unreadable",
			Help: "1 while this worker cannot open the endpoint's secret with its key file: the endpoint's rows are kept pending, not attempted, until a worker holding the key sends them.",
		}, []string{"endpoint"})}
}

// unreadable tells that r's endpoint's secret does not open (why names the
// key id, never a value): the gauge at once, the log and the mark at most
// once every secretMarkEvery.
func (w *secretWatch) unreadable(ctx context.Context, r webhook.Delivery, why string) {
	if w == nil {
		return
	}
	w.gauge.WithLabelValues(r.EndpointName).Set(1)
	w.mu.Lock()
	last, seen := w.marked[r.EndpointID]
	due := !seen || w.now().Sub(last) >= secretMarkEvery
	if due {
		w.marked[r.EndpointID] = w.now()
	}
	w.mu.Unlock()
	if !due {
		return
	}
	w.log.Warn("worker: an endpoint's secret cannot be opened with WEBHOOK_SECRETS_KEY_FILE: its rows are kept pending, not sent, until a worker holding the key sends them",
		"endpoint", r.EndpointName, "error", why)
	if err := w.store.MarkSecretUnreadable(ctx, r.EndpointID, why); err != nil && ctx.Err() == nil {
		w.log.Warn("worker: marking the endpoint's secret unreadable failed", "endpoint", r.EndpointName, "error", err)
	}
}

// readable tells that r's endpoint's secret opened: the gauge and this
// worker's mark, if it made one, are cleared.
func (w *secretWatch) readable(ctx context.Context, r webhook.Delivery) {
	if w == nil {
		return
	}
	w.mu.Lock()
	_, seen := w.marked[r.EndpointID]
	delete(w.marked, r.EndpointID)
	w.mu.Unlock()
	if !seen {
		return
	}
	w.gauge.DeleteLabelValues(r.EndpointName)
	w.log.Info("worker: the endpoint's secret opens again", "endpoint", r.EndpointName)
	if err := w.store.ClearSecretUnreadable(ctx, r.EndpointID); err != nil && ctx.Err() == nil {
		w.log.Warn("worker: clearing the endpoint's unreadable-secret mark failed", "endpoint", r.EndpointName, "error", err)
	}
}
