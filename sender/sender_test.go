package sender_test

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fluxora/webhook-worker/sender"
)

const (
	testSecret = "whsec_test"
	testTS     = 1700000000
)

var testPayload = []byte(`{"a":1}`)

// fixedClock returns testTS for ever.
func fixedClock() time.Time { return time.Unix(testTS, 0) }

// bundle holds the test server of setup and what it saw.
type bundle struct {
	srv  *httptest.Server
	hits atomic.Int64
}

// setup starts an HTTP server running h and returns a Sender for its
// /hook?tenant=7 endpoint with secret testSecret and fixedClock. opts may
// change the Config before New.
func setup(t *testing.T, h http.HandlerFunc, opts ...func(*sender.Config)) (*sender.Sender, *bundle) {
	t.Helper()
	b := startServer(t, h, nil)
	return newSender(t, b.srv.URL+"/hook?tenant=7", opts...), b
}

// startServer starts a server running h, counting requests. tune, when not
// nil, adjusts the unstarted server (e.g. to start TLS); it must start it.
func startServer(t *testing.T, h http.HandlerFunc, tune func(*httptest.Server)) *bundle {
	t.Helper()
	b := &bundle{}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		h(w, r)
	}))
	b.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // hijacks and TLS failures are expected
	if tune != nil {
		tune(b.srv)
	} else {
		b.srv.Start()
	}
	t.Cleanup(b.srv.Close)
	return b
}

// newSender returns a Sender for url with secret testSecret and fixedClock,
// after opts change the Config.
func newSender(t *testing.T, url string, opts ...func(*sender.Config)) *sender.Sender {
	t.Helper()
	cfg := sender.Config{URL: url, Secret: []byte(testSecret), Now: fixedClock}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := sender.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
}

func testRequest() sender.Request {
	return sender.Request{
		DeliveryID: "0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10",
		EventType:  "invoice.paid",
		Attempt:    1,
		Payload:    testPayload,
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	valid := sender.Config{URL: "https://example.com/hook", Secret: []byte(testSecret)}
	insecure := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	tests := []struct {
		name    string
		change  func(*sender.Config)
		wantErr string
	}{
		{"Valid", func(*sender.Config) {}, ""},
		{"AllSet", func(c *sender.Config) {
			c.Timeout, c.MaxConns, c.Now, c.Transport = time.Second, 4, time.Now, http.DefaultTransport
		}, ""},
		{"MissingURL", func(c *sender.Config) { c.URL = "" }, "sender: URL: must not be empty"},
		{"PlainHTTP", func(c *sender.Config) { c.URL = "http://example.com/" }, "sender: URL: must be https"},
		{"Credentials", func(c *sender.Config) { c.URL = "https://bob:hunter2@example.com/" }, "sender: URL: must not contain credentials"},
		{"EmptySecret", func(c *sender.Config) { c.Secret = []byte{} }, "sender: Secret: must not be empty"},
		{"NilSecret", func(c *sender.Config) { c.Secret = nil }, "sender: Secret: must not be empty"},
		{"NegativeTimeout", func(c *sender.Config) { c.Timeout = -time.Second }, "sender: Timeout: must not be negative"},
		{"NegativeMaxConns", func(c *sender.Config) { c.MaxConns = -1 }, "sender: MaxConns: must not be negative"},
		{"NegativeMaxResponseHeaderBytes", func(c *sender.Config) { c.MaxResponseHeaderBytes = -1 },
			"sender: MaxResponseHeaderBytes: must not be negative"},
		{"InsecureTransport", func(c *sender.Config) { c.Transport = insecure }, "sender: Transport: must verify TLS certificates"},
		{"EveryProblem", func(c *sender.Config) { c.URL, c.Secret = "ftp://x", nil }, "sender: URL: must be https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid
			tt.change(&cfg)
			s, err := sender.New(cfg)
			if tt.wantErr == "" {
				if err != nil || s == nil {
					t.Fatalf("New = %v, %v; want a Sender", s, err)
				}
				s.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("New error %q echoes the URL password", err)
			}
		})
	}
}

func TestSendHeadersAndBody(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, uri, proto string
		header             http.Header
		body               []byte
	}
	got := make(chan seen, 1)
	s, b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Proto, r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	})
	req := testRequest()
	req.Attempt = 3
	res := s.Send(t.Context(), req)
	if res.Outcome != sender.Delivered || res.Status != 204 || res.Error != "" || res.RetryAfter != 0 {
		t.Fatalf("Send = %+v, want delivered 204", res)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration = %v, want > 0", res.Duration)
	}
	r := <-got
	if r.method != http.MethodPost || r.uri != "/hook?tenant=7" || r.proto != "HTTP/1.1" {
		t.Errorf("request line = %s %s %s, want POST /hook?tenant=7 HTTP/1.1", r.method, r.uri, r.proto)
	}
	if string(r.body) != `{"a":1}` {
		t.Errorf("body = %q, want {\"a\":1}", r.body)
	}
	want := http.Header{
		"Content-Type":          {"application/json"},
		"Content-Length":        {"7"},
		"User-Agent":            {"fluxora-webhook-worker"},
		"X-Fluxora-Delivery-Id": {"0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10"},
		"X-Fluxora-Event":       {"invoice.paid"},
		"X-Fluxora-Timestamp":   {"1700000000"},
		"X-Fluxora-Signature":   {signVector},
		"X-Fluxora-Attempt":     {"3"},
		"Webhook-Id":            {"0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10"},
		"Webhook-Timestamp":     {"1700000000"},
		"Webhook-Signature":     {standardSignature(t, "0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10", 1700000000, r.body)},
	}
	if !maps.EqualFunc(r.header, want, slices.Equal) {
		t.Errorf("headers =\n%v\nwant exactly\n%v", r.header, want)
	}
	if n := b.hits.Load(); n != 1 {
		t.Errorf("server hits = %d, want 1", n)
	}
}

func TestSendEmptyPayload(t *testing.T) {
	t.Parallel()
	got := make(chan string, 2)
	s, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- string(body) + "|" + r.Header.Get("X-Fluxora-Signature")
	})
	req := testRequest()
	req.Payload = nil
	if res := s.Send(t.Context(), req); res.Outcome != sender.Delivered {
		t.Fatalf("Send = %+v, want delivered", res)
	}
	if want := "|" + sender.Sign([]byte(testSecret), testTS, nil); <-got != want {
		t.Errorf("empty payload not sent as an empty signed body")
	}
}

func TestSendFreshTimestampPerAttempt(t *testing.T) {
	t.Parallel()
	var tick atomic.Int64
	clock := func() time.Time { return time.Unix(testTS+tick.Add(1)*60, 0) }
	type sig struct{ ts, sig, attempt string }
	got := make(chan sig, 3)
	s, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
		got <- sig{r.Header.Get("X-Fluxora-Timestamp"), r.Header.Get("X-Fluxora-Signature"), r.Header.Get("X-Fluxora-Attempt")}
	}, func(c *sender.Config) { c.Now = clock })
	req := testRequest()
	seenSigs := map[string]bool{}
	for attempt := 1; attempt <= 3; attempt++ {
		req.Attempt = attempt
		if res := s.Send(t.Context(), req); res.Outcome != sender.Delivered {
			t.Fatalf("attempt %d: %+v", attempt, res)
		}
		h := <-got
		wantTS := int64(testTS + attempt*60)
		if h.ts != strconv.FormatInt(wantTS, 10) || h.attempt != strconv.Itoa(attempt) {
			t.Errorf("attempt %d: timestamp %s attempt %s, want %d and %d", attempt, h.ts, h.attempt, wantTS, attempt)
		}
		if h.sig != sender.Sign([]byte(testSecret), wantTS, testPayload) {
			t.Errorf("attempt %d: signature does not match its timestamp", attempt)
		}
		if seenSigs[h.sig] {
			t.Errorf("attempt %d: signature reused", attempt)
		}
		seenSigs[h.sig] = true
	}
}

func TestSendClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status  int
		want    sender.Outcome
		wantErr string
	}{
		{200, sender.Delivered, ""},
		{204, sender.Delivered, ""},
		{301, sender.Permanent, "redirect 301 not followed"},
		{302, sender.Permanent, "redirect 302 not followed"},
		{400, sender.Permanent, "http 400"},
		{404, sender.Permanent, "http 404"},
		{408, sender.Retryable, "http 408"},
		{410, sender.Permanent, "http 410"},
		{429, sender.Retryable, "http 429"},
		{500, sender.Retryable, "http 500"},
		{503, sender.Retryable, "http 503"},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			s, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				io.WriteString(w, "consumer says no")
			})
			res := s.Send(t.Context(), testRequest())
			if res.Outcome != tt.want || res.Status != tt.status || res.Error != tt.wantErr || res.RetryAfter != 0 {
				t.Fatalf("Send = %+v, want %v status %d error %q", res, tt.want, tt.status, tt.wantErr)
			}
		})
	}
}

func TestSendRetryAfter(t *testing.T) {
	t.Parallel()
	date := func(d time.Duration) string { return fixedClock().Add(d).UTC().Format(http.TimeFormat) }
	tests := []struct {
		name   string
		status int
		header string
		want   time.Duration
	}{
		{"429Seconds", 429, "7", 7 * time.Second},
		{"503Seconds", 503, "120", 2 * time.Minute},
		{"429Date", 429, date(45 * time.Second), 45 * time.Second},
		{"503Date", 503, date(30 * time.Second), 30 * time.Second},
		{"503PastDate", 503, date(-time.Minute), 0},
		{"429Huge", 429, "999999999", 24 * time.Hour},
		{"429Garbage", 429, "later", 0},
		{"429Negative", 429, "-3", 0},
		{"429Missing", 429, "", 0},
		{"500Ignored", 500, "7", 0},
		{"502Ignored", 502, "7", 0},
		{"200Ignored", 200, "7", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.WriteHeader(tt.status)
			})
			res := s.Send(t.Context(), testRequest())
			if res.Status != tt.status || res.RetryAfter != tt.want {
				t.Fatalf("Send = %+v, want status %d RetryAfter %v", res, tt.status, tt.want)
			}
		})
	}
}

func TestSendRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			_, target := setup(t, status(200))
			s, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.srv.URL+"/elsewhere", code)
			})
			res := s.Send(t.Context(), testRequest())
			want := "redirect " + strconv.Itoa(code) + " not followed"
			if res.Outcome != sender.Permanent || res.Status != code || res.Error != want {
				t.Fatalf("Send = %+v, want permanent %d %q", res, code, want)
			}
			if n := target.hits.Load(); n != 0 {
				t.Fatalf("redirect target got %d hits, want 0", n)
			}
		})
	}
}

func TestSendRefusesBadHeaderValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, deliveryID, eventType, wantErr string
	}{
		{"DeliveryIDCRLF", "abc\r\nX-Injected: 1", "e", "invalid DeliveryID"},
		{"DeliveryIDLF", "abc\n", "e", "invalid DeliveryID"},
		{"DeliveryIDNUL", "abc\x00", "e", "invalid DeliveryID"},
		{"DeliveryIDTooLong", strings.Repeat("a", 256), "e", "invalid DeliveryID"},
		{"EventTypeCR", "id", "invoice.paid\r", "invalid EventType"},
		{"EventTypeTab", "id", "invoice\tpaid", "invalid EventType"},
		{"EventTypeDEL", "id", "invoice\x7f", "invalid EventType"},
		{"EventTypeC1", "id", "invoice\u0085paid", "invalid EventType"},
		{"EventTypeBadUTF8", "id", "invoice\xffpaid", "invalid EventType"},
		{"EventTypeTooLong", "id", strings.Repeat("é", 128), "invalid EventType"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, b := setup(t, status(200))
			req := testRequest()
			req.DeliveryID, req.EventType = tt.deliveryID, tt.eventType
			res := s.Send(t.Context(), req)
			if res.Outcome != sender.Permanent || res.Status != 0 || !strings.HasPrefix(res.Error, tt.wantErr) {
				t.Fatalf("Send = %+v, want permanent, status 0, error %q...", res, tt.wantErr)
			}
			if n := b.hits.Load(); n != 0 {
				t.Fatalf("server got %d requests, want 0", n)
			}
		})
	}
	t.Run("LimitsAccepted", func(t *testing.T) {
		t.Parallel()
		s, _ := setup(t, status(200))
		req := testRequest()
		req.DeliveryID, req.EventType = strings.Repeat("a", 255), "évènement.créé"
		if res := s.Send(t.Context(), req); res.Outcome != sender.Delivered {
			t.Fatalf("Send = %+v, want delivered", res)
		}
	})
}

func TestSendConcurrent(t *testing.T) {
	t.Parallel()
	var bad atomic.Int64
	s, b := setup(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get("X-Fluxora-Timestamp"), 10, 64)
		if r.Header.Get("X-Fluxora-Signature") != sender.Sign([]byte(testSecret), ts, body) {
			bad.Add(1)
		}
	})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			req := testRequest()
			req.Payload = []byte(`{"n":` + strconv.Itoa(i) + `}`)
			if res := s.Send(t.Context(), req); res.Outcome != sender.Delivered {
				t.Errorf("send %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n != 0 || b.hits.Load() != 64 {
		t.Fatalf("%d of %d requests had a wrong signature", n, b.hits.Load())
	}
}

func TestSendReusesConnections(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	b := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	}, func(srv *httptest.Server) {
		srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
	})
	s := newSender(t, b.srv.URL)
	for range 5 {
		if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered {
			t.Fatalf("Send = %+v", res)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 sequential sends opened %d connections, want 1", n)
	}
}

func TestSendContextCanceled(t *testing.T) {
	t.Parallel()
	s, _ := setup(t, status(200))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := s.Send(ctx, testRequest())
	if res.Outcome != sender.Retryable || res.Status != 0 || res.Error != "context canceled" {
		t.Fatalf("Send = %+v, want retryable \"context canceled\"", res)
	}
}

// permanentRefusal is what the egress guard returns.
type permanentRefusal struct{}

func (permanentRefusal) Error() string   { return "egress guard: refused a private address (10.0.0.1)" }
func (permanentRefusal) Permanent() bool { return true }

// A Control function that refuses the address stops the request before it
// is sent, and a permanent refusal makes the attempt Permanent.
func TestControlRefusalIsPermanent(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	s, err := sender.New(sender.Config{URL: srv.URL, Secret: []byte("k"), Timeout: 5 * time.Second,
		Control: func(network, address string, c syscall.RawConn) error { return permanentRefusal{} }})
	if err != nil {
		t.Fatal(err)
	}
	res := s.Send(context.Background(), sender.Request{DeliveryID: "d", EventType: "e", Attempt: 1, Payload: []byte(`{}`)})
	if res.Outcome != sender.Permanent || !strings.Contains(res.Error, "egress guard: refused a private address") || hits.Load() != 0 {
		t.Fatalf("result %+v, %d requests reached the server", res, hits.Load())
	}
}

// standardSignature is the webhook-signature the official Standard Webhooks
// library computes for testSecret.
func standardSignature(t *testing.T, id string, ts int64, body []byte) string {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, time.Unix(ts, 0), body)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// The signature header families can be chosen; the official library
// verifies the Standard Webhooks ones, for a whsec_ secret (its base64 part
// is the key) and for any other secret (its bytes are the key).
func TestSignatureHeaderFamilies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		headers sender.Headers
		secret  string
		fluxora bool
		std     bool
	}{
		{"both by default", 0, "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true, true},
		{"fluxora only", sender.FluxoraHeaders, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true, false},
		{"standard only, raw secret", sender.StandardHeaders, "a plain shared secret", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan *http.Request, 1)
			bodies := make(chan []byte, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got <- r
				bodies <- b
			}))
			defer srv.Close()
			s, err := sender.New(sender.Config{URL: srv.URL, Secret: []byte(tc.secret), Headers: tc.headers})
			if err != nil {
				t.Fatal(err)
			}
			if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered {
				t.Fatalf("%+v", res)
			}
			r, body := <-got, <-bodies
			if (r.Header.Get("X-Fluxora-Signature") != "") != tc.fluxora || (r.Header.Get("Webhook-Signature") != "") != tc.std {
				t.Fatalf("headers %v", r.Header)
			}
			if r.Header.Get("X-Fluxora-Delivery-Id") == "" || r.Header.Get("X-Fluxora-Timestamp") == "" {
				t.Fatalf("x-fluxora metadata missing: %v", r.Header)
			}
			if !tc.std {
				return
			}
			wh, err := standardwebhooks.NewWebhook(tc.secret)
			if !strings.HasPrefix(tc.secret, "whsec_") {
				wh, err = standardwebhooks.NewWebhookRaw([]byte(tc.secret))
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := wh.Verify(body, r.Header); err != nil {
				t.Fatalf("the official library refuses the request: %v", err)
			}
			if r.Header.Get("Webhook-Timestamp") != r.Header.Get("X-Fluxora-Timestamp") || r.Header.Get("Webhook-Id") != r.Header.Get("X-Fluxora-Delivery-Id") {
				t.Fatalf("webhook-id/timestamp differ from x-fluxora-*: %v", r.Header)
			}
		})
	}
}
