// Package sender delivers one outbox row as a signed HTTP POST to the
// consumer URL: it builds the request, signs it, sends it, reads the response
// through a size limit and classifies the outcome as Delivered, Retryable or
// Permanent.
//
// The signature (header x-fluxora-signature) is the lowercase hex
// HMAC-SHA256, keyed with the shared secret, of the decimal Unix timestamp
// sent in x-fluxora-timestamp, a '.', and the body byte for byte; see Sign.
//
// Each request also carries the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature; see SignStandard), and, while a
// rotated-out secret is in its grace period (Config.PreviousSecret), a
// second webhook-signature keyed with it. A secret that is an ed25519
// private key ("whsk_…") signs webhook-signature alone, "v1a," (see
// SignEd25519).
//
// PerEndpoint sends each delivery (webhook.Delivery) with the Sender of
// its endpoint, made on first use and kept, a bounded number of them.
//
// With a tracer (PerEndpointConfig.Tracer), each attempt is an
// OpenTelemetry span of kind client, a child of the traceparent among the
// event's headers when there is one; the request carries the span's
// traceparent in its place (see PerEndpoint.Send).
//
// Redirects are never followed and TLS certificates are always verified.
// The package never logs, and no error or Result text it produces contains
// the secret, the payload, or the URL's credentials or query string.
package sender

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

const (
	// TimeoutDefault is the default Config.Timeout.
	TimeoutDefault = 10 * time.Second
	// MaxConnsDefault is the default Config.MaxConns.
	MaxConnsDefault = 64
	// MaxResponseBytes is how much of a response body Send reads (64 KiB).
	// The rest is discarded: when the body ends within the limit the
	// connection is reused, otherwise it is closed.
	MaxResponseBytes = 64 << 10
	// MaxErrorTextBytes is the longest Result.Error, in bytes.
	MaxErrorTextBytes = 512
	// MaxResponseHeaderBytesDefault is the default
	// Config.MaxResponseHeaderBytes (64 KiB).
	MaxResponseHeaderBytesDefault = 64 << 10
)

// Config configures a Sender.
type Config struct {
	// URL is the consumer endpoint. Required; it must pass ValidateURL.
	URL string
	// Secret is the HMAC-SHA256 key of the signatures, or an ed25519
	// private key ("whsk_…", see package signingkey), which signs
	// webhook-signature with "v1a,": its requests carry the Standard
	// Webhooks headers whatever Headers says, and no x-fluxora-signature
	// (x-fluxora-timestamp stays). Required, non-empty. New copies it.
	Secret []byte
	// Timeout bounds one Send: connecting, writing the request, waiting
	// for the response and reading its body. Defaults to 10s
	// (TimeoutDefault); must not be negative.
	Timeout time.Duration
	// MaxConns caps the connections, idle and in use, to the consumer.
	// Defaults to 64 (MaxConnsDefault); must not be negative. Ignored when
	// Transport is set.
	MaxConns int
	// MaxResponseHeaderBytes caps the response's status line and headers,
	// in bytes (HTTP/1.1 1xx responses are each allowed as much). A
	// consumer that sends more fails the attempt as Retryable with "response
	// headers exceeded <n> bytes", and its connection is closed: nothing
	// past the limit is read or kept. Defaults to 64 KiB
	// (MaxResponseHeaderBytesDefault); must not be negative. Ignored when
	// Transport is set.
	MaxResponseHeaderBytes int64
	// Now is the clock of x-fluxora-timestamp and of Retry-After dates.
	// Defaults to time.Now. Result.Duration uses the monotonic clock.
	Now func() time.Time
	// Transport overrides the HTTP transport, for tests. Defaults to a
	// keep-alive *http.Transport that verifies TLS certificates, ignores
	// proxy environment variables and speaks HTTP/1.1. An *http.Transport
	// with InsecureSkipVerify is refused.
	Transport http.RoundTripper
	// Headers chooses the signature headers: FluxoraHeaders
	// (x-fluxora-timestamp, x-fluxora-signature), StandardHeaders
	// (webhook-id, webhook-timestamp, webhook-signature), or both. 0 means
	// both (the default). The other x-fluxora-* headers are always sent.
	Headers Headers
	// Control, when set, runs before every connection the default
	// transport dials, with the address it is about to connect to (after
	// DNS): the egress guard. An error it returns that has a
	// Permanent() bool method answering true makes the attempt Permanent
	// (nothing is sent; retrying cannot help). Ignored when Transport is
	// set.
	Control func(network, address string, c syscall.RawConn) error
	// LookupNetIP, when set, resolves a host name for the default
	// transport instead of the system resolver (a test's resolver stub:
	// tests never depend on DNS); each address it returns is dialled in
	// turn, through Control. An IP host, in any spelling, is never
	// resolved. Nil: net.DefaultResolver. Ignored when Transport is set.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// PreviousSecret is the secret a rotation replaced. Until
	// PreviousUntil (by Now), webhook-signature carries a second
	// signature keyed with it, after the one keyed with Secret, each by
	// its own scheme (an HMAC secret "v1,", an ed25519 key "v1a,");
	// x-fluxora-signature always uses Secret alone. Empty: none.
	PreviousSecret []byte
	// PreviousUntil ends PreviousSecret's grace period; required with it.
	PreviousUntil time.Time
	// Proxy, when set, carries every request of the default transport: an
	// http:// or https:// proxy, to which an https URL's connection is a
	// CONNECT tunnel (an http URL's request is forwarded). Its
	// credentials, if any, go in Proxy-Authorization. With a proxy,
	// Control does not run on the proxy's address (the operator's own);
	// it runs once per Send on the URL's host when that is an IP address
	// (a name is the proxy's to resolve and check). Nil: direct
	// connections; the environment's proxy variables are never read.
	Proxy *url.URL
	// RootCAs verifies the consumer's certificate. Nil: the system roots.
	// Ignored when Transport is set.
	RootCAs *x509.CertPool
	// GetClientCertificate, when set, gives the client certificate a
	// consumer asking for one receives (mutual TLS), on each handshake;
	// one with no Certificate sends none. Ignored when Transport is set.
	GetClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
}

// Headers is a set of signature header families.
type Headers int

// The signature header families of Config.Headers.
const (
	FluxoraHeaders  Headers = 1 << iota // x-fluxora-timestamp, x-fluxora-signature
	StandardHeaders                     // webhook-id, webhook-timestamp, webhook-signature
)

// Sender sends signed webhook requests to one consumer. It is safe for
// concurrent use.
type Sender struct {
	url     *url.URL
	secret  []byte
	timeout time.Duration
	now     func() time.Time
	// maxHeader is the response header limit errorText names.
	maxHeader int64
	// literal is the URL's host:port when a proxy carries the requests and
	// the host is an IP address: Control checks it on each Send.
	literal string
	control func(network, address string, c syscall.RawConn) error
	// transport sends each request once: calling it directly (not through
	// an http.Client) never follows a redirect, a 3xx comes back as it is,
	// and no per-request header copies are made for redirect handling.
	transport http.RoundTripper
	signers   sync.Pool // of *signer keyed with secret
	headers   Headers
	// current signs webhook-signature with Config.Secret; previous, nil
	// without a Config.PreviousSecret, beside it while now is before
	// prevUntil. Each by its own scheme ("v1," or "v1a,").
	current   *standardSigner
	previous  *standardSigner
	prevUntil time.Time
	// target is the URL's attributes of an attempt's span (spanTarget).
	target []attribute.KeyValue
	// certAsked is set once a consumer asked this sender for a client
	// certificate (TLS CertificateRequest): a connection it closes right
	// after the handshake has most likely refused the certificate.
	certAsked atomic.Bool
}

// New returns a Sender, or an error naming each invalid field, such as
// "sender: URL: must not contain credentials" or "sender: Secret: must not
// be empty".
func New(cfg Config) (*Sender, error) {
	u, err := ValidateURL(cfg.URL)
	if err != nil {
		err = fieldError("URL", err.Error())
	}
	if err := errors.Join(err, checkConfig(cfg)); err != nil {
		return nil, err
	}
	s := &Sender{
		url:     u,
		secret:  bytes.Clone(cfg.Secret),
		timeout: cmp.Or(cfg.Timeout, TimeoutDefault),
		now:     cfg.Now,
		target:  spanTarget(u),
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.maxHeader = cmp.Or(cfg.MaxResponseHeaderBytes, MaxResponseHeaderBytesDefault)
	transport := cfg.Transport
	if transport == nil {
		if get := cfg.GetClientCertificate; get != nil {
			cfg.GetClientCertificate = func(r *tls.CertificateRequestInfo) (*tls.Certificate, error) {
				s.certAsked.Store(true)
				return get(r)
			}
		}
		transport = newTransport(cfg, cmp.Or(cfg.MaxConns, MaxConnsDefault), s.maxHeader)
		if host, ok := proxiedLiteral(u.Hostname()); ok && cfg.Proxy != nil && cfg.Control != nil {
			port := cmp.Or(u.Port(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
			s.literal, s.control = net.JoinHostPort(host, port), cfg.Control
		}
	} else if t, ok := transport.(*http.Transport); ok {
		s.maxHeader = transportHeaderLimit(t)
	}
	s.transport = transport
	s.signers.New = func() any { return &signer{mac: hmac.New(sha256.New, s.secret)} }
	s.headers = cmp.Or(cfg.Headers, FluxoraHeaders|StandardHeaders)
	s.current = newStandardSigner(s.secret)
	if s.current.ed != nil {
		// An ed25519 key signs webhook-signature alone: x-fluxora-signature
		// is an HMAC, which its consumers, holding the public key, could
		// not check.
		s.headers = StandardHeaders
	}
	if len(cfg.PreviousSecret) > 0 {
		s.previous, s.prevUntil = newStandardSigner(cfg.PreviousSecret), cfg.PreviousUntil
	}
	return s, nil
}

// proxiedLiteral is the address the guard judges for host (the URL's, as
// ValidateURL returns it) when a proxy carries the request and resolves
// its names: an IP address as it is, and "localhost" or a name under it as
// 127.0.0.1, since RFC 6761 makes them loopback wherever they are
// resolved. Any other name is the proxy's to resolve and check.
func proxiedLiteral(host string) (string, bool) {
	if _, err := netip.ParseAddr(host); err == nil {
		return host, true
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return "127.0.0.1", true
	}
	return "", false
}

// checkConfig validates the fields other than URL.
func checkConfig(cfg Config) error {
	var errs []error
	if len(cfg.Secret) == 0 {
		errs = append(errs, fieldError("Secret", "must not be empty"))
	}
	if len(cfg.PreviousSecret) > 0 && cfg.PreviousUntil.IsZero() {
		errs = append(errs, fieldError("PreviousUntil", "is required with PreviousSecret"))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fieldError("Timeout", "must not be negative"))
	}
	if cfg.MaxConns < 0 {
		errs = append(errs, fieldError("MaxConns", "must not be negative"))
	}
	if cfg.MaxResponseHeaderBytes < 0 {
		errs = append(errs, fieldError("MaxResponseHeaderBytes", "must not be negative"))
	}
	if t, ok := cfg.Transport.(*http.Transport); ok && t.TLSClientConfig != nil && t.TLSClientConfig.InsecureSkipVerify {
		errs = append(errs, fieldError("Transport", "must verify TLS certificates"))
	}
	return errors.Join(errs...)
}

func fieldError(field, msg string) error {
	return errors.New("sender: " + field + ": " + msg)
}

// Close closes idle connections. The Sender stays usable.
func (s *Sender) Close() {
	if c, ok := s.transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// newTransport returns the default transport: keep-alive with up to
// maxConns connections, response headers read up to maxHeader bytes,
// HTTP/1.1, certificates verified (by cfg.RootCAs), cfg.Proxy or no proxy,
// cfg's client certificate. It is built from scratch rather than cloned
// from http.DefaultTransport so that neither proxy settings nor a
// process-wide change to DefaultTransport leak in. Dial, TLS handshake and
// response have no limits of their own: the attempt's context
// (Config.Timeout) bounds them all, so whichever stalls, the attempt ends
// as "timeout after <Timeout>".
func newTransport(cfg Config, maxConns int, maxHeader int64) *http.Transport {
	control, proxy := cfg.Control, http.ProxyURL(cfg.Proxy)
	if cfg.Proxy == nil {
		proxy = nil // never from the environment
	} else {
		control = nil // the dialer dials the proxy alone; Send checks literals
	}
	dialer := &net.Dialer{KeepAlive: 30 * time.Second, Control: control}
	dial := dialer.DialContext
	if cfg.LookupNetIP != nil {
		dial = dialResolved(dialer, cfg.LookupNetIP)
	}
	return &http.Transport{
		Proxy:       proxy,
		DialContext: dial,
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs,
			GetClientCertificate: cfg.GetClientCertificate},
		DisableCompression:  true, // the body is discarded; keep headers exact
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		MaxConnsPerHost:     maxConns,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
		// Without it, net/http reads up to 10 MiB of headers into memory
		// per response: a hostile consumer could hold that much per
		// connection, times MaxConns, in every worker.
		MaxResponseHeaderBytes: maxHeader,
	}
}

// transportHeaderLimit is the response header limit t applies, net/http's
// default (10 MiB) when it sets none.
func transportHeaderLimit(t *http.Transport) int64 {
	if t.MaxResponseHeaderBytes > 0 {
		return t.MaxResponseHeaderBytes
	}
	return 10 << 20
}

// dialResolved dials a host name's addresses from lookup, one after the
// other until one connects; an IP address is dialled as it is.
func dialResolved(d *net.Dialer, lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, address)
		}
		addrs, err := lookup(ctx, "ip", host)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		err = &net.OpError{Op: "dial", Net: network, Err: errors.New("no address for the host")}
		for _, a := range addrs {
			c, derr := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if derr == nil {
				return c, nil
			}
			err = derr
		}
		return nil, err
	}
}
