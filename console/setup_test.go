package console_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/console"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// testToken is the console's token in the tests.
const testToken = "console-test-token-0123456789abcdef"

// catalog satisfies console.Endpoints with the store's own statements (the
// worker's adapter goes through package endpoints, a leaf this package may
// not import).
type catalog struct{ s *outbox.Store }

func (c catalog) Disable(ctx context.Context, name, reason string) (int64, error) {
	d, err := c.s.DisableEndpointByName(ctx, name, reason)
	return d.Moved, err
}

func (c catalog) Enable(ctx context.Context, name string) error {
	_, err := c.s.EnableEndpoint(ctx, name)
	return err
}

func (c catalog) RotateSecret(ctx context.Context, name string, grace time.Duration) (string, error) {
	secret := "whsec_rotated" + time.Now().Format("150405.000000000")
	_, err := c.s.RotateEndpointSecret(ctx, name, func(_, current string) (outbox.Rotation, error) {
		if current == secret {
			return outbox.Rotation{}, outbox.ErrSameSecret
		}
		return outbox.Rotation{Secret: secret, Previous: current}, nil
	}, grace)
	if errors.Is(err, outbox.ErrSameSecret) {
		return "", err
	}
	return secret, err
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// bundle is what a test gets: the console's URL, its database, its log.
type bundle struct {
	url string
	db  *testdb.DB
	log *syncBuffer
	ids map[string]string // endpoint name -> id
	srv *console.Server   // to serve requests without a connection
}

// requestHeaders stands in for sender.Header, which this package may not
// import (cmd/worker's TestConsoleShowsTheRequestSent compares the real
// one with a real request): a header for each field of r, the signature
// empty.
func requestHeaders(r console.Request) http.Header {
	h := http.Header{"X-Fluxora-Delivery-Id": {r.DeliveryID}, "X-Fluxora-Event": {r.EventType}, "X-Fluxora-Endpoint": {r.Endpoint},
		"X-Fluxora-Attempt": {strconv.Itoa(r.Attempt)}, "X-Fluxora-Timestamp": {strconv.FormatInt(r.Started.Unix(), 10)}, "Webhook-Signature": {""}}
	if r.OrderingKey != "" {
		h["Webhook-Ordering-Key"], h["Webhook-Sequence"] = []string{r.OrderingKey}, []string{strconv.FormatInt(r.Sequence, 10)}
	}
	for _, f := range r.Headers {
		h[f.Name] = []string{f.Value}
	}
	return h
}

// setup serves a console over a fresh database holding the fixture:
// endpoints shop (enabled) and off (disabled), shop's attempts of the last
// hour, and dead letters of both.
func setup(t *testing.T) bundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the console's breakers read from breakers.
func setupWith(t *testing.T, breakers console.Breakers) bundle {
	t.Helper()
	return setupConfig(t, func(c *console.Config) { c.Breakers = breakers })
}

// setupConfig is setup with the console's Config changed by edit.
func setupConfig(t *testing.T, edit func(*console.Config)) bundle {
	t.Helper()
	db := testdb.New(t)
	store, err := outbox.New(db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	cfg := console.Config{Store: store, Endpoints: catalog{store}, Token: []byte(testToken),
		Logger: slog.New(slog.NewTextHandler(log, nil)), RequestHeaders: requestHeaders}
	edit(&cfg)
	srv, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	b := bundle{url: ts.URL, db: db, log: log, ids: map[string]string{}, srv: srv}
	b.fixture(t)
	return b
}

// Delivery ids of the fixture.
const (
	event     = "e0000000-0000-4000-8000-000000000001" // an event fanned out to shop
	deadShop1 = "d0000000-0000-4000-8000-000000000001" // died 2 hours ago
	deadShop2 = "d0000000-0000-4000-8000-000000000002" // died 30 minutes ago
	deadOff   = "d0000000-0000-4000-8000-000000000003"
)

func (b bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func (b bundle) fixture(t *testing.T) {
	t.Helper()
	for _, name := range []string{"shop", "off"} {
		var id string
		err := b.db.Pool.QueryRow(context.Background(), `INSERT INTO webhook_endpoints (name, url, secret, enabled, disabled_reason)
			VALUES ($1, 'https://hooks.example.com/'||$1||'?key=sekrit', 'whsec_fixture', $1 = 'shop', CASE WHEN $1 = 'off' THEN 'http 410' END)
			RETURNING id::text`, name).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		b.ids[name] = id
	}
	// The event, processed by its fan-out a minute ago, and its delivery to
	// shop (the claim's derived id), attempted twice.
	b.exec(t, `INSERT INTO webhook_outbox (delivery_id, event_type, payload, headers, processed, processed_at, fanout, created_at)
		VALUES ($1, 'order.created', '{"order": 42, "note": "`+strings.Repeat("x", 3000)+`"}', '{"traceparent": "00-abc-01"}', true, now() - interval '1 minute', 1, now() - interval '2 minutes')`, event)
	b.exec(t, `INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class, error)
		VALUES (md5($1::uuid::text || '/' || $2)::uuid, $2::uuid, 1, now() - interval '50 seconds', 120, 503, 'retryable', 'http 503'),
		       (md5($1::uuid::text || '/' || $2)::uuid, $2::uuid, 2, now() - interval '20 seconds', 80, 200, NULL, NULL)`, event, b.ids["shop"])
	for _, dl := range [][3]string{{deadShop1, b.ids["shop"], "2 hours"}, {deadShop2, b.ids["shop"], "30 minutes"}, {deadOff, b.ids["off"], "10 minutes"}} {
		b.exec(t, `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id, died_at)
			VALUES ($1, 'order.created', '{"k": 1}', 3, 500, 'http 500', $2, now() - $3::interval)`, dl[0], dl[1], dl[2])
	}
}

// count runs a count(*) of the fixture's tables.
func (b bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// client is an HTTP client that follows no redirect, with a cookie jar.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends a request (form values as the body of a POST) with the
// headers given, and returns the response and its body.
func do(t *testing.T, c *http.Client, method, u string, form url.Values, headers ...string) (*http.Response, string) {
	t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	return res, buf.String()
}

// bearer is the header of a scripted call.
var bearer = []string{"Authorization", "Bearer " + testToken}

// login logs c in through the form and returns the session's CSRF token
// (read from the overview's logout form).
func login(t *testing.T, b bundle, c *http.Client) string {
	t.Helper()
	res, _ := do(t, c, "POST", b.url+"/login", url.Values{"token": {testToken}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d, want 303", res.StatusCode)
	}
	res, body := do(t, c, "GET", b.url+"/", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("overview after login: %d", res.StatusCode)
	}
	_, rest, ok := strings.Cut(body, `name="csrf" value="`)
	if !ok {
		t.Fatal("no CSRF token on the overview")
	}
	return rest[:strings.IndexByte(rest, '"')]
}
