package endpoints

import (
	"context"
	"crypto/tls"
	"sync"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
)

// clientCertsEvery is how often RunClientCerts reads the endpoints' client
// certificates again: a certificate added or replaced is used by the new
// connections made after it (10 s, as the janitor's pass).
const clientCertsEvery = 10 * time.Second

// clientCerts holds the endpoints' client certificates (mutual TLS), keys
// opened, by endpoint id, for the senders, which ask for the current one
// on each handshake (ClientCertificate).
type clientCerts struct {
	mu sync.RWMutex
	by map[string]loadedCert
}

type loadedCert struct {
	stored outbox.ClientCert // as read: a change is parsed again
	cert   *tls.Certificate
}

// LoadClientCerts reads the endpoints' client certificates and sets
// fluxora_webhook_endpoint_client_cert_days_left; one that changed is
// opened (Sealer.OpenClientKey) and parsed again. A certificate that does
// not load is left out (the endpoint's handshakes then send none, and its
// consumer's refusal is recorded), logged by endpoint name, never with its
// key.
func (s *Store) LoadClientCerts(ctx context.Context) error {
	list, err := s.db.ClientCerts(ctx)
	if err != nil {
		return err
	}
	next := make(map[string]loadedCert, len(list))
	s.m.certDaysLeft.Reset()
	for _, sc := range list {
		s.m.certDaysLeft.WithLabelValues(sc.Name).Set(sc.NotAfter.Sub(s.now()).Hours() / 24)
		s.certs.mu.RLock()
		old, ok := s.certs.by[sc.ID]
		s.certs.mu.RUnlock()
		if ok && old.stored == sc {
			next[sc.ID] = old
			continue
		}
		cert, err := s.parseClientCert(sc)
		if err != nil {
			s.log.Error("endpoints: client certificate not loaded", "endpoint", sc.Name, "error", err)
			continue
		}
		next[sc.ID] = loadedCert{stored: sc, cert: cert}
	}
	s.certs.mu.Lock()
	s.certs.by = next
	s.certs.mu.Unlock()
	return nil
}

func (s *Store) parseClientCert(sc outbox.ClientCert) (*tls.Certificate, error) {
	if s.sealer == nil {
		return nil, ErrNoSealer
	}
	key, err := s.sealer.OpenClientKey(sc.ID, sc.Key)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair([]byte(sc.CertPEM), key)
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

// RunClientCerts reads the client certificates (and the consumers' pauses,
// LoadFlows) every clientCertsEvery until ctx ends (the first read is the caller's LoadClientCerts, whose
// failure fails the start); a failed read is logged and tried at the next
// tick. It returns nil when ctx ends.
func (s *Store) RunClientCerts(ctx context.Context) error {
	t := time.NewTicker(clientCertsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := s.LoadClientCerts(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("endpoints: client certificates not read", "error", err)
		}
		if err := s.LoadFlows(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("endpoints: pauses not read", "error", err)
		}
	}
}

// ClientCertificate is the GetClientCertificate of the endpoint id's
// sender: its current certificate, or none.
func (s *Store) ClientCertificate(id string) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		s.certs.mu.RLock()
		defer s.certs.mu.RUnlock()
		if l, ok := s.certs.by[id]; ok {
			return l.cert, nil
		}
		return &tls.Certificate{}, nil
	}
}
