package sender

import (
	"cmp"
	"container/list"
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fluxora/webhook-worker/eventheaders"
	"github.com/fluxora/webhook-worker/webhook"
)

const (
	// PerEndpointMaxDefault is the default PerEndpointConfig.Max.
	PerEndpointMaxDefault = 1024
	// EnvNameDefault is the default PerEndpointConfig.EnvName: the name
	// of the WEBHOOK_URL endpoint everywhere.
	EnvNameDefault = "default"
)

// SecretWatch is told of the endpoints' secrets that do not open and of
// those that open again (package endpoints keeps the mark and the gauge).
// Neither method returns an error: it reports what it could not do itself.
type SecretWatch interface {
	// SecretUnreadable tells that d's endpoint's secret does not open; why
	// names the key id, never a value.
	SecretUnreadable(ctx context.Context, d webhook.Delivery, why string)
	// SecretReadable tells that d's endpoint's secret opened.
	SecretReadable(ctx context.Context, d webhook.Delivery)
}

// PerEndpointConfig configures a PerEndpoint.
type PerEndpointConfig struct {
	// Env is the sender of the WEBHOOK_URL endpoint (the deliveries with no
	// EndpointID). Nil: there is none, and its deliveries are Permanent.
	Env *Sender
	// EnvName is the WEBHOOK_URL endpoint's name in its requests
	// (x-fluxora-endpoint). Defaults to "default" (EnvNameDefault).
	EnvName string
	// Base configures every table endpoint's sender but for its URL, its
	// secrets and its client certificate, which come from the delivery.
	Base Config
	// Max is how many table endpoints' senders are kept: past it, the
	// least recently used one is dropped (its idle connections closed) and
	// made anew on its endpoint's next delivery. Defaults to 1024
	// (PerEndpointMaxDefault); must not be negative.
	Max int
	// OpenSecret opens an endpoint's stored secret (sealed at rest) with
	// its id. Nil: secrets are stored as they are.
	OpenSecret func(endpointID, stored string) ([]byte, error)
	// ClientCertificate gives the GetClientCertificate of an endpoint's
	// sender (Config.GetClientCertificate). Nil: no endpoint has one.
	ClientCertificate func(endpointID string) func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// Secrets is told of the secrets that do not open and of those that
	// open again. Nil: nobody is.
	Secrets SecretWatch
	// Tracer, when set, makes a span of every attempt (see Send). Nil:
	// none, and an event's headers go out exactly as they were written.
	Tracer trace.Tracer
}

// PerEndpoint sends each delivery with the sender of its endpoint: Env for
// the WEBHOOK_URL endpoint, and one per table endpoint, made on first use
// and made anew when the endpoint's URL or secrets change (a rotation, or
// the end of its grace period). Each has its own connections, at most
// Base.MaxConns of them. At most Max table endpoints' senders are kept
// (least recently used dropped first), so that the endpoints removed,
// disabled or idle do not hold theirs forever. It is safe for concurrent
// use.
type PerEndpoint struct {
	env     *Sender
	envName string
	base    Config
	max     int
	open    func(endpointID, stored string) ([]byte, error)
	certs   func(endpointID string) func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	secrets SecretWatch
	tracer  trace.Tracer

	mu  sync.Mutex
	per map[string]*list.Element // by endpoint id; each holds an *endpointSender
	lru list.List                // most recently used first
}

// endpointSender is a table endpoint's sender, with what it was made of.
type endpointSender struct {
	id                    string
	url, secret, previous string
	previousUntil         time.Time
	s                     *Sender
	err                   string // why the endpoint's URL or secret cannot be used
	// sealed says err is a secret that does not open: the delivery is kept
	// pending, not attempted (a worker given the key sends it), never sent
	// unsigned; why is err without the endpoint's name.
	sealed bool
	why    string
	// told says Secrets was told that this sender's secret opens.
	told atomic.Bool
}

// NewPerEndpoint returns a PerEndpoint, or an error naming the field.
func NewPerEndpoint(cfg PerEndpointConfig) (*PerEndpoint, error) {
	if cfg.Max < 0 {
		return nil, fieldError("Max", "must not be negative")
	}
	if cfg.OpenSecret == nil {
		cfg.OpenSecret = func(_, stored string) ([]byte, error) { return []byte(stored), nil }
	}
	return &PerEndpoint{env: cfg.Env, envName: cmp.Or(cfg.EnvName, EnvNameDefault), base: cfg.Base,
		max: cmp.Or(cfg.Max, PerEndpointMaxDefault), open: cfg.OpenSecret, certs: cfg.ClientCertificate,
		secrets: cfg.Secrets, tracer: cfg.Tracer, per: map[string]*list.Element{}}, nil
}

// Send makes one attempt of d with its endpoint's sender. A secret that
// does not open is NotAttempted (deferred, no attempt spent, never
// dead-lettered for a key the worker may be given); any other reason the
// endpoint cannot be sent to, or headers that do not parse, is Permanent.
//
// With a Tracer, every attempt but a NotAttempted one is a span (see
// startSpan), a child of the event's own traceparent when its headers
// carry one, and the request carries the span's traceparent instead.
func (p *PerEndpoint) Send(ctx context.Context, d webhook.Delivery) webhook.Result {
	s, es := p.forDelivery(d)
	if s == nil && es.sealed {
		if p.secrets != nil {
			p.secrets.SecretUnreadable(ctx, d, es.why)
		}
		return webhook.Result{Class: webhook.NotAttempted, Error: es.err}
	}
	if s != nil && es != nil && !es.told.Load() && es.told.CompareAndSwap(false, true) && p.secrets != nil {
		p.secrets.SecretReadable(ctx, d)
	}
	name := d.EndpointName
	if d.EndpointID == "" {
		name = p.envName
	}
	// The event's headers are parsed on every attempt: nothing to cache,
	// and nothing at all for a delivery without them.
	headers, herr := eventheaders.Parse(d.Headers)
	req := Request{DeliveryID: d.DeliveryID, EventType: d.EventType, Attempt: d.Attempt, Payload: d.Payload, Endpoint: name,
		Headers: headers, OrderingKey: d.OrderingKey, Sequence: d.Sequence}
	if p.tracer == nil {
		return result(attempt(ctx, s, es, req, herr))
	}
	span, traceparent := p.startSpan(ctx, d, s, req)
	req.Traceparent = traceparent
	res := attempt(ctx, s, es, req, herr)
	endSpan(span, res)
	return result(res)
}

// attempt sends req with s, or says why it cannot: s is nil (es.err) or
// the event's headers did not parse (herr).
func attempt(ctx context.Context, s *Sender, es *endpointSender, req Request, herr error) Result {
	switch {
	case s == nil:
		return Result{Outcome: Permanent, Error: es.err}
	case herr != nil:
		return Result{Outcome: Permanent, Error: "invalid headers: " + herr.Error()}
	}
	return s.Send(ctx, req)
}

func result(res Result) webhook.Result {
	return webhook.Result{Class: res.Outcome, Status: res.Status, Error: res.Error, RetryAfter: res.RetryAfter, Duration: res.Duration}
}

// Close closes every sender's idle connections.
func (p *PerEndpoint) Close() {
	if p.env != nil {
		p.env.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for el := p.lru.Front(); el != nil; el = el.Next() {
		if es := el.Value.(*endpointSender); es.s != nil {
			es.s.Close()
		}
	}
}

// forDelivery returns the sender of d's endpoint, or why there is none.
func (p *PerEndpoint) forDelivery(d webhook.Delivery) (*Sender, *endpointSender) {
	if d.EndpointID == "" {
		if p.env == nil {
			return nil, &endpointSender{err: "no WEBHOOK_URL endpoint configured"}
		}
		return p.env, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if el, ok := p.per[d.EndpointID]; ok {
		es := el.Value.(*endpointSender)
		if es.url == d.URL && es.secret == d.Secret && es.previous == d.PreviousSecret && es.previousUntil.Equal(d.PreviousUntil) {
			p.lru.MoveToFront(el)
			return es.s, es
		}
		p.drop(el)
	}
	es := p.newSender(d)
	p.per[d.EndpointID] = p.lru.PushFront(es)
	for p.lru.Len() > p.max {
		p.drop(p.lru.Back())
	}
	return es.s, es
}

// drop forgets a sender and closes its idle connections; a request it is
// making goes on (its connection closes when idle, IdleConnTimeout).
func (p *PerEndpoint) drop(el *list.Element) {
	es := p.lru.Remove(el).(*endpointSender)
	delete(p.per, es.id)
	if es.s != nil {
		es.s.Close()
	}
}

// newSender makes the sender of d's endpoint, its secrets opened, or says
// why it cannot.
func (p *PerEndpoint) newSender(d webhook.Delivery) *endpointSender {
	es := &endpointSender{id: d.EndpointID, url: d.URL, secret: d.Secret, previous: d.PreviousSecret, previousUntil: d.PreviousUntil}
	cfg := p.base
	cfg.URL = d.URL
	var err error
	if cfg.Secret, err = p.open(d.EndpointID, d.Secret); err == nil && d.PreviousSecret != "" {
		cfg.PreviousUntil = d.PreviousUntil
		cfg.PreviousSecret, err = p.open(d.EndpointID, d.PreviousSecret)
	}
	if err != nil {
		es.why = "its secret cannot be opened: " + err.Error()
		es.err, es.sealed = "endpoint "+d.EndpointName+": "+es.why, true
		return es
	}
	if p.certs != nil {
		cfg.GetClientCertificate = p.certs(d.EndpointID)
	}
	es.s, err = New(cfg)
	if err != nil {
		// The error names the field, never its value.
		es.err = "endpoint " + d.EndpointName + ": " + err.Error()
	}
	return es
}
