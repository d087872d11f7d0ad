package endpoints

import (
	"context"
	"sync"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// secretMarkEvery is how often, at most, a worker that cannot open an
// endpoint's secret says so again (its log line and the endpoint's mark,
// secret_unreadable_at): about once a deferral (the dispatcher's
// NotAttemptedDelay), whatever the number of rows deferred.
const secretMarkEvery = time.Minute

// secretMarks are the endpoints this worker marked as having a secret it
// cannot open, by id: when it last marked each.
//
// The Store tells of the endpoints' secrets this worker cannot open
// (sealed under a key its key file, read at start, does not hold: a key
// removed from the file, or a secret stored since under a new key): the
// gauge fluxora_webhook_endpoint_secret_unreadable, a warning, and the
// endpoint's mark in the table, which `worker status` and the console
// show. The worker records it rather than the commands opening the
// secrets themselves: the commands' key file is not the worker's (a key
// added to the file since the worker started opens the secret for them,
// not for the worker), so only the worker knows. It clears its mark when
// it opens that endpoint's secret again; a worker that starts clears
// every mark (it opened every credential).
type secretMarks struct {
	mu     sync.Mutex
	marked map[string]time.Time
}

// SecretUnreadable tells that d's endpoint's secret does not open (why
// names the key id, never a value): the gauge at once, the log and the
// mark at most once every secretMarkEvery.
func (s *Store) SecretUnreadable(ctx context.Context, d webhook.Delivery, why string) {
	s.m.secretUnreadable.WithLabelValues(d.EndpointName).Set(1)
	s.marks.mu.Lock()
	last, seen := s.marks.marked[d.EndpointID]
	due := !seen || s.now().Sub(last) >= secretMarkEvery
	if due {
		s.marks.marked[d.EndpointID] = s.now()
	}
	s.marks.mu.Unlock()
	if !due {
		return
	}
	s.log.Warn("endpoints: an endpoint's secret cannot be opened with WEBHOOK_SECRETS_KEY_FILE: its rows are kept pending, not sent, until a worker holding the key sends them",
		"endpoint", d.EndpointName, "error", why)
	if err := s.db.MarkSecretUnreadable(ctx, d.EndpointID, why); err != nil && ctx.Err() == nil {
		s.log.Warn("endpoints: marking the endpoint's secret unreadable failed", "endpoint", d.EndpointName, "error", err)
	}
}

// SecretReadable tells that d's endpoint's secret opened: the gauge and
// this worker's mark, if it made one, are cleared.
func (s *Store) SecretReadable(ctx context.Context, d webhook.Delivery) {
	s.marks.mu.Lock()
	_, seen := s.marks.marked[d.EndpointID]
	delete(s.marks.marked, d.EndpointID)
	s.marks.mu.Unlock()
	if !seen {
		return
	}
	s.m.secretUnreadable.DeleteLabelValues(d.EndpointName)
	s.log.Info("endpoints: the endpoint's secret opens again", "endpoint", d.EndpointName)
	if err := s.db.ClearSecretUnreadable(ctx, d.EndpointID); err != nil && ctx.Err() == nil {
		s.log.Warn("endpoints: clearing the endpoint's unreadable-secret mark failed", "endpoint", d.EndpointName, "error", err)
	}
}
