package sender_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fluxora/webhook-worker/sender"
)

// leakQuery is in the URL of the tests below; no Result.Error may show it.
const leakQuery = "token=q-s3cr3t"

// assertNoLeak fails when text shows the URL's query, the secret or the
// payload.
func assertNoLeak(t *testing.T, text string) {
	t.Helper()
	for _, s := range []string{"q-s3cr3t", testSecret, string(testPayload), "http://", "/hook"} {
		if strings.Contains(text, s) {
			t.Errorf("error text %q contains %q", text, s)
		}
	}
	if len(text) > sender.MaxErrorTextBytes {
		t.Errorf("error text is %d bytes, over %d", len(text), sender.MaxErrorTextBytes)
	}
}

func TestSendTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := startServer(t, func(w http.ResponseWriter, r *http.Request) { <-release }, nil)
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	s := newSender(t, b.srv.URL+"/hook?"+leakQuery, func(c *sender.Config) { c.Timeout = 200 * time.Millisecond })

	res := s.Send(t.Context(), testRequest())
	if res.Outcome != sender.Retryable || res.Status != 0 || res.Error != "timeout after 200ms" {
		t.Fatalf("Send = %+v, want retryable \"timeout after 200ms\"", res)
	}
	if res.Duration < 200*time.Millisecond {
		t.Errorf("Duration = %v, want at least the 200ms timeout", res.Duration)
	}
}

func TestSendTimeoutWhileReadingBody(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		http.NewResponseController(w).Flush()
		<-release
	}, nil)
	t.Cleanup(func() { close(release) })
	// The timeout must fire after the headers arrived: 2 s leaves a loaded
	// machine (-race, the whole suite on 2 cores) time to get them there.
	s := newSender(t, b.srv.URL, func(c *sender.Config) { c.Timeout = 2 * time.Second })

	res := s.Send(t.Context(), testRequest())
	if res.Outcome != sender.Retryable || res.Status != 200 || res.Error != "timeout after 2s" {
		t.Fatalf("Send = %+v, want retryable status 200 \"timeout after 2s\"", res)
	}
}

// hijack takes over the connection, writes raw and resets it (SO_LINGER 0).
func hijack(raw string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Write([]byte(raw))
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}
}

func TestSendConnectionReset(t *testing.T) {
	t.Parallel()
	t.Run("BeforeResponse", func(t *testing.T) {
		t.Parallel()
		b := startServer(t, hijack(""), nil)
		s := newSender(t, b.srv.URL+"/hook?"+leakQuery)
		res := s.Send(t.Context(), testRequest())
		if res.Outcome != sender.Retryable || res.Status != 0 || res.Error == "" {
			t.Fatalf("Send = %+v, want retryable with a reason", res)
		}
		assertNoLeak(t, res.Error)
	})
	t.Run("MidBody", func(t *testing.T) {
		t.Parallel()
		b := startServer(t, hijack("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial"), nil)
		s := newSender(t, b.srv.URL+"/hook?"+leakQuery)
		res := s.Send(t.Context(), testRequest())
		if res.Outcome != sender.Retryable || res.Status != 200 || !strings.HasPrefix(res.Error, "read response: ") {
			t.Fatalf("Send = %+v, want retryable status 200 \"read response: ...\"", res)
		}
		assertNoLeak(t, res.Error)
	})
}

func TestSendConnectionRefused(t *testing.T) {
	t.Parallel()
	b := startServer(t, status(200), nil)
	url := b.srv.URL + "/hook?" + leakQuery
	b.srv.Close() // nothing listens on the port any more
	s := newSender(t, url)
	res := s.Send(t.Context(), testRequest())
	if res.Outcome != sender.Retryable || res.Status != 0 || !strings.Contains(res.Error, "connection refused") {
		t.Fatalf("Send = %+v, want retryable \"... connection refused\"", res)
	}
	assertNoLeak(t, res.Error)
}

// countingTransport counts the response body bytes its caller reads.
type countingTransport struct {
	next   http.RoundTripper
	read   atomic.Int64
	closed atomic.Bool
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{resp.Body, c}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	c *countingTransport
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.c.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error {
	b.c.closed.Store(true)
	return b.ReadCloser.Close()
}

func TestSendLimitsResponseBody(t *testing.T) {
	t.Parallel()
	huge := make([]byte, 10<<20)
	b := startServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write(huge) }, nil)
	ct := &countingTransport{next: b.srv.Client().Transport}
	s := newSender(t, b.srv.URL, func(c *sender.Config) { c.Transport = ct })

	res := s.Send(t.Context(), testRequest())
	if res.Outcome != sender.Delivered || res.Status != 200 {
		t.Fatalf("Send = %+v, want delivered", res)
	}
	if n := ct.read.Load(); n != sender.MaxResponseBytes {
		t.Errorf("read %d body bytes, want exactly MaxResponseBytes (%d)", n, sender.MaxResponseBytes)
	}
	if !ct.closed.Load() {
		t.Error("response body not closed")
	}
}

func TestSendTLS(t *testing.T) {
	t.Parallel()
	t.Run("UntrustedCertificate", func(t *testing.T) {
		t.Parallel()
		b := startServer(t, status(200), (*httptest.Server).StartTLS)
		s := newSender(t, b.srv.URL+"/hook?"+leakQuery) // default transport: the test CA is not trusted
		res := s.Send(t.Context(), testRequest())
		if res.Outcome != sender.Retryable || res.Status != 0 || !strings.Contains(res.Error, "certificate") {
			t.Fatalf("Send = %+v, want retryable certificate error", res)
		}
		assertNoLeak(t, res.Error)
		if n := b.hits.Load(); n != 0 {
			t.Fatalf("handler ran %d times over an untrusted connection", n)
		}
	})
	t.Run("TrustedCertificate", func(t *testing.T) {
		t.Parallel()
		b := startServer(t, status(200), (*httptest.Server).StartTLS)
		s := newSender(t, b.srv.URL, func(c *sender.Config) { c.Transport = b.srv.Client().Transport })
		if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered {
			t.Fatalf("Send = %+v, want delivered", res)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestSendNeverPanics(t *testing.T) {
	t.Parallel()
	t.Run("PanickingTransport", func(t *testing.T) {
		t.Parallel()
		s := newSender(t, "https://example.com/hook", func(c *sender.Config) {
			c.Transport = roundTripFunc(func(*http.Request) (*http.Response, error) { panic("boom " + testSecret) })
		})
		res := s.Send(t.Context(), testRequest())
		if res.Outcome != sender.Retryable || strings.Contains(res.Error, "boom") {
			t.Fatalf("Send = %+v, want retryable without the panic value", res)
		}
	})
	t.Run("NilContext", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, status(200))
		var ctx context.Context
		if res := s.Send(ctx, testRequest()); res.Outcome != sender.Delivered {
			t.Fatalf("Send = %+v, want delivered", res)
		}
	})
	t.Run("TransportErrorQuotingURL", func(t *testing.T) {
		t.Parallel()
		s := newSender(t, "https://example.com/hook?"+leakQuery, func(c *sender.Config) {
			c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
				return nil, errors.New("cannot reach " + r.URL.String() + "\x00\xff" + strings.Repeat("x", 1000))
			})
		})
		res := s.Send(t.Context(), testRequest())
		if res.Outcome != sender.Retryable || !strings.HasPrefix(res.Error, "cannot reach [url]") {
			t.Fatalf("Send = %+v, want retryable \"cannot reach [url]...\"", res)
		}
		assertNoLeak(t, res.Error)
		if strings.Contains(res.Error, "\x00") || !utf8.ValidString(res.Error) {
			t.Errorf("error text %q keeps control or invalid bytes", res.Error)
		}
	})
}

func TestSenderClose(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, status(200))
	for range 2 {
		if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered {
			t.Fatalf("Send = %+v, want delivered", res)
		}
		s.Close() // idempotent, and the Sender stays usable
	}
}

// A consumer that accepts the TCP connection and then never reads or
// answers, over plain HTTP and with a TLS handshake that never completes:
// the request timeout ends the attempt, retryable.
func TestSendAcceptsButNeverAnswers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never read
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(accepted)
		for c := range accepted {
			c.Close()
		}
	})
	for _, scheme := range []string{"http", "https"} {
		s := newSender(t, scheme+"://"+ln.Addr().String()+"/hook?"+leakQuery,
			func(c *sender.Config) { c.Timeout = 200 * time.Millisecond })
		res := s.Send(t.Context(), testRequest())
		if res.Outcome != sender.Retryable || res.Status != 0 || res.Error != "timeout after 200ms" {
			t.Fatalf("%s: Send = %+v, want retryable \"timeout after 200ms\"", scheme, res)
		}
		if res.Duration < 200*time.Millisecond {
			t.Errorf("%s: Duration = %v, want at least the 200ms timeout", scheme, res.Duration)
		}
	}
}
