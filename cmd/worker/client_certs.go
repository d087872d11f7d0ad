package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/sealed"
)

// clientCertsEvery is how often the workers read the endpoints' client
// certificates again: a certificate added or replaced is used by the new
// connections made after it (10 s, as the janitor's pass).
const clientCertsEvery = 10 * time.Second

// clientCerts holds the endpoints' client certificates (mutual TLS), keys
// opened, by endpoint id, read at start and every clientCertsEvery, and
// sets fluxora_webhook_endpoint_client_cert_days_left. The senders ask it
// for the current certificate on each handshake.
type clientCerts struct {
	store *outbox.Store
	keys  *sealed.Keyring
	log   *slog.Logger
	now   func() time.Time
	days  *prometheus.GaugeVec

	mu sync.RWMutex
	by map[string]loadedCert
}

type loadedCert struct {
	stored outbox.ClientCert // as read: a change is parsed again
	cert   *tls.Certificate
}

func newClientCerts(store *outbox.Store, keys *sealed.Keyring, log *slog.Logger, reg prometheus.Registerer) *clientCerts {
	return &clientCerts{store: store, keys: keys, log: log, now: time.Now, by: map[string]loadedCert{},
		days: promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{
			Name: "fluxora_webhook_endpoint_client_cert_days_left",
			Help: "Days until each endpoint's client certificate expires (negative: expired), read every 10 s.",
		}, []string{"endpoint"})}
}

// load reads the certificates; one that changed is opened and parsed
// again. A certificate that does not load is left out (the endpoint's
// handshakes then send none, and its consumer's refusal is recorded),
// logged by endpoint name, never with its key.
func (c *clientCerts) load(ctx context.Context) error {
	list, err := c.store.ClientCerts(ctx)
	if err != nil {
		return err
	}
	next := make(map[string]loadedCert, len(list))
	c.days.Reset()
	for _, sc := range list {
		c.days.WithLabelValues(sc.Name).Set(sc.NotAfter.Sub(c.now()).Hours() / 24)
		c.mu.RLock()
		old, ok := c.by[sc.ID]
		c.mu.RUnlock()
		if ok && old.stored == sc {
			next[sc.ID] = old
			continue
		}
		cert, err := c.parse(sc)
		if err != nil {
			c.log.Error("worker: client certificate not loaded", "endpoint", sc.Name, "error", err)
			continue
		}
		next[sc.ID] = loadedCert{stored: sc, cert: cert}
	}
	c.mu.Lock()
	c.by = next
	c.mu.Unlock()
	return nil
}

func (c *clientCerts) parse(sc outbox.ClientCert) (*tls.Certificate, error) {
	key, err := c.keys.Open(sc.Key, sealed.EndpointClientKey(sc.ID))
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair([]byte(sc.CertPEM), key)
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

// Run reads the certificates every clientCertsEvery until ctx ends.
// (The first read is the start's, which fails the start.)
func (c *clientCerts) Run(ctx context.Context) error {
	return refresh(ctx, clientCertsEvery, false, c.load, c.log, "worker: client certificates not read")
}

// forEndpoint is the GetClientCertificate of the endpoint id's sender:
// its current certificate, or none.
func (c *clientCerts) forEndpoint(id string) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c.mu.RLock()
		defer c.mu.RUnlock()
		if l, ok := c.by[id]; ok {
			return l.cert, nil
		}
		return &tls.Certificate{}, nil
	}
}
