package main

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/eventheaders"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/sealed"
	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/webhook"
)

// The dispatcher declares what it needs; these adapters hand it the leaf
// packages, which do not know one another.
var (
	_ dispatcher.Sender = (*httpSenders)(nil)
	_ dispatcher.Gate   = endpointGate{}
)

// sendersMax is how many table endpoints' senders httpSenders keeps: past
// it, the least recently used one is dropped (its idle connections closed)
// and made anew on its endpoint's next row.
const sendersMax = 1024

// httpSenders sends each row with the sender of its endpoint: env for the
// WEBHOOK_URL endpoint (nil without one), and one per table endpoint, made
// on first use and made anew when the endpoint's URL or secrets change (a
// rotation, or the end of its grace period). Each has its own connections,
// at most the endpoint's cap of them. At most max table endpoints' senders
// are kept (least recently used dropped first), so that the endpoints
// removed, disabled or idle do not hold theirs forever.
type httpSenders struct {
	env  *sender.Sender
	base sender.Config // of the table endpoints' senders, but URL and Secret
	max  int           // sendersMax
	// keys open the endpoints' sealed secrets, once per sender made (the
	// cache is keyed by the stored values); nil: only plaintexts of before.
	keys *sealed.Keyring
	// certs gives each endpoint's sender its client certificate; nil: none.
	certs *clientCerts
	// secrets is told of the secrets that do not open and of those that
	// open again; nil: nobody is.
	secrets *secretWatch

	mu  sync.Mutex
	per map[string]*list.Element // by endpoint id; each holds an *endpointSender
	lru list.List                // most recently used first
}

type endpointSender struct {
	id                    string
	url, secret, previous string
	previousUntil         time.Time
	s                     *sender.Sender
	err                   string // why the endpoint's URL or secret cannot be used
	// sealed says err is a secret that does not open: the row is kept
	// pending, not attempted (a worker given the key sends it), never sent
	// unsigned; why is err without the endpoint's name.
	sealed bool
	why    string
	// told says secrets was told that this sender's secret opens.
	told atomic.Bool
}

func newHTTPSenders(env *sender.Sender, base sender.Config) *httpSenders {
	return &httpSenders{env: env, base: base, max: sendersMax, per: map[string]*list.Element{}}
}

// forRow returns the sender of r's endpoint, or why there is none.
func (h *httpSenders) forRow(r webhook.Delivery) (*sender.Sender, *endpointSender) {
	if r.EndpointID == "" {
		if h.env == nil {
			return nil, &endpointSender{err: "no WEBHOOK_URL endpoint configured"}
		}
		return h.env, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if el, ok := h.per[r.EndpointID]; ok {
		es := el.Value.(*endpointSender)
		if es.url == r.URL && es.secret == r.Secret && es.previous == r.PreviousSecret && es.previousUntil.Equal(r.PreviousUntil) {
			h.lru.MoveToFront(el)
			return es.s, es
		}
		h.drop(el)
	}
	es := h.newSender(r)
	h.per[r.EndpointID] = h.lru.PushFront(es)
	for h.lru.Len() > h.max {
		h.drop(h.lru.Back())
	}
	return es.s, es
}

// drop forgets a sender and closes its idle connections; a request it is
// making goes on (its connection closes when idle, IdleConnTimeout).
func (h *httpSenders) drop(el *list.Element) {
	es := h.lru.Remove(el).(*endpointSender)
	delete(h.per, es.id)
	if es.s != nil {
		es.s.Close()
	}
}

// newSender makes the sender of r's endpoint, its secrets opened, or says
// why it cannot.
func (h *httpSenders) newSender(r webhook.Delivery) *endpointSender {
	es := &endpointSender{id: r.EndpointID, url: r.URL, secret: r.Secret, previous: r.PreviousSecret, previousUntil: r.PreviousUntil}
	cfg := h.base
	cfg.URL = r.URL
	var err error
	if cfg.Secret, err = h.keys.Open(r.Secret, sealed.EndpointSecret(r.EndpointID)); err == nil && r.PreviousSecret != "" {
		cfg.PreviousUntil = r.PreviousUntil
		cfg.PreviousSecret, err = h.keys.Open(r.PreviousSecret, sealed.EndpointSecret(r.EndpointID))
	}
	if err != nil {
		es.why = "its secret cannot be opened: " + err.Error()
		es.err, es.sealed = "endpoint "+r.EndpointName+": "+es.why, true
		return es
	}
	if h.certs != nil {
		cfg.GetClientCertificate = h.certs.forEndpoint(r.EndpointID)
	}
	es.s, err = sender.New(cfg)
	if err != nil {
		// The error names the field, never its value.
		es.err = "endpoint " + r.EndpointName + ": " + err.Error()
	}
	return es
}

func (h *httpSenders) Send(ctx context.Context, r webhook.Delivery) webhook.Result {
	s, es := h.forRow(r)
	if s == nil {
		if es.sealed {
			// Not attempted: deferred, no attempt spent, never dead-lettered
			// for a key the worker may be given.
			h.secrets.unreadable(ctx, r, es.why)
			return webhook.Result{Class: webhook.NotAttempted, Error: es.err}
		}
		return webhook.Result{Class: webhook.Permanent, Error: es.err}
	}
	if es != nil && !es.told.Load() && es.told.CompareAndSwap(false, true) {
		h.secrets.readable(ctx, r)
	}
	name := r.EndpointName
	if r.EndpointID == "" {
		name = dispatcher.DefaultEndpointName
	}
	// The event's headers are parsed on every attempt: nothing to cache,
	// and nothing at all for a row without them.
	headers, err := eventheaders.Parse(r.Headers)
	if err != nil {
		return webhook.Result{Class: webhook.Permanent, Error: "invalid headers: " + err.Error()}
	}
	res := s.Send(ctx, sender.Request{DeliveryID: r.DeliveryID, EventType: r.EventType, Attempt: r.Attempt, Payload: r.Payload, Endpoint: name,
		Headers: headers, OrderingKey: r.OrderingKey, Sequence: r.Sequence})
	return webhook.Result{Class: res.Outcome, Status: res.Status, Error: res.Error, RetryAfter: res.RetryAfter, Duration: res.Duration}
}

// Close closes every sender's idle connections.
func (h *httpSenders) Close() {
	if h.env != nil {
		h.env.Close()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for el := h.lru.Front(); el != nil; el = el.Next() {
		if es := el.Value.(*endpointSender); es.s != nil {
			es.s.Close()
		}
	}
}

// endpointGate is the gates as the dispatcher's Gate: keyed by each row's
// endpoint URL, with the endpoint's own retry limit when it has one.
type endpointGate struct {
	g      *gates.Gates
	envURL string
}

func (e endpointGate) url(r webhook.Delivery) string {
	if r.EndpointID == "" {
		return e.envURL
	}
	return r.URL
}

func (e endpointGate) Check(ctx context.Context, r webhook.Delivery) dispatcher.Decision {
	d := e.g.CheckLimit(ctx, e.url(r), r.Attempt, r.RetryRPS)
	return dispatcher.Decision{Allow: d.Allow, DeferFor: d.DeferFor, Probe: d.Probe}
}

func (e endpointGate) Record(ctx context.Context, r webhook.Delivery, class webhook.Class, probe bool) {
	e.g.Record(ctx, e.url(r), class, probe)
}

// goneDisabler disables an endpoint that answered 410 Gone.
type goneDisabler struct{ s *endpoints.Store }

func (g goneDisabler) Disable(ctx context.Context, id, reason string) (int64, error) {
	return g.s.Disable(ctx, id, endpoints.Gone, reason)
}
