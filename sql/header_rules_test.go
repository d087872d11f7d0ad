package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fluxora/webhook-worker/eventheaders"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/producer"
)

// manyHeaders is a JSON object of n headers h1..hn.
func manyHeaders(n int) string {
	m := map[string]string{}
	for i := 1; i <= n; i++ {
		m[fmt.Sprintf("h%d", i)] = "v"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// headerCases are webhook_outbox.headers values, each with the text the
// database's problem function gives for it ("" when accepted).
var headerCases = []struct{ json, problem string }{
	{`{}`, ""},
	{`{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x-correlation-id": "c-42"}`, ""},
	{`{"X-Request-Id": "", "Authorization-Hint": "é ünïcode ok", "a!#$%&'*+-.^_|~1": "v"}`, ""},
	{`{"Webhook": "a name of its own", "X-Fluxora": "no dash after it", "Hosted-By": "x"}`, ""},
	{manyHeaders(16), ""},
	{`{"x": "` + strings.Repeat("v", 8192-1) + `"}`, ""},

	{`[]`, "must be a JSON object of string values"},
	{`"traceparent"`, "must be a JSON object of string values"},
	{`null`, "must be a JSON object of string values"},
	{`{"x-n": 1}`, `"x-n": the value must be a string without CR, LF or control characters`},
	{`{"x-o": {"a": "b"}}`, `"x-o": the value must be a string without CR, LF or control characters`},
	{`{"x-null": null, "bad name": "x"}`, `"x-null": the value must be a string without CR, LF or control characters`},
	{manyHeaders(17), "at most 16 headers, got 17"},
	{`{"x": "` + strings.Repeat("v", 8192) + `"}`, "at most 8 KiB (names and values), got 8193 bytes"},
	{`{"bad name": "x"}`, `"bad name": a header name must be an HTTP token`},
	{`{"": "x"}`, `"": a header name must be an HTTP token`},
	{`{"x:y": "1"}`, `"x:y": a header name must be an HTTP token`},
	{`{"x\r\ny": "1"}`, `"x\r\ny": a header name must be an HTTP token`},
	{`{"x\u0001\"\\y": "1"}`, `"x\u0001\"\\y": a header name must be an HTTP token`},
	{`{"naïve": "1"}`, `"naïve": a header name must be an HTTP token`},
	{`{"Content-Type": "text/plain"}`, `"Content-Type" may not be set: the worker sets it`},
	{`{"content-length": "1"}`, `"content-length" may not be set: the worker sets it`},
	{`{"HOST": "evil.example"}`, `"HOST" may not be set: the worker sets it`},
	{`{"User-Agent": "x"}`, `"User-Agent" may not be set: the worker sets it`},
	{`{"X-Fluxora-Event": "forged"}`, `"X-Fluxora-Event" may not be set: x-fluxora-* headers are the worker's`},
	{`{"x-fluxora-signature": "v1=x"}`, `"x-fluxora-signature" may not be set: x-fluxora-* headers are the worker's`},
	{`{"Webhook-Signature": "v1,x"}`, `"Webhook-Signature" may not be set: webhook-* headers are the worker's`},
	{`{"webhook-id": "x"}`, `"webhook-id" may not be set: webhook-* headers are the worker's`},
	{`{"Connection": "close"}`, `"Connection" may not be set: it is a hop-by-hop header`},
	{`{"Keep-Alive": "1"}`, `"Keep-Alive" may not be set: it is a hop-by-hop header`},
	{`{"Proxy-Connection": "1"}`, `"Proxy-Connection" may not be set: it is a hop-by-hop header`},
	{`{"Proxy-Authenticate": "1"}`, `"Proxy-Authenticate" may not be set: it is a hop-by-hop header`},
	{`{"Proxy-Authorization": "1"}`, `"Proxy-Authorization" may not be set: it is a hop-by-hop header`},
	{`{"TE": "trailers"}`, `"TE" may not be set: it is a hop-by-hop header`},
	{`{"Trailer": "x"}`, `"Trailer" may not be set: it is a hop-by-hop header`},
	{`{"Transfer-Encoding": "chunked"}`, `"Transfer-Encoding" may not be set: it is a hop-by-hop header`},
	{`{"Upgrade": "websocket"}`, `"Upgrade" may not be set: it is a hop-by-hop header`},
	// Reserved names are judged with "_" read as "-", as CGI, WSGI and some
	// proxies read them: each of these would reach such a consumer as one
	// of the worker's headers.
	{`{"X_Fluxora_Event": "forged"}`, `"X_Fluxora_Event" may not be set: x-fluxora-* headers are the worker's`},
	{`{"Webhook_Signature": "v1,x"}`, `"Webhook_Signature" may not be set: webhook-* headers are the worker's`},
	{`{"webhook_id": "x"}`, `"webhook_id" may not be set: webhook-* headers are the worker's`},
	{`{"X-Fluxora_Signature": "v1=x"}`, `"X-Fluxora_Signature" may not be set: x-fluxora-* headers are the worker's`},
	{`{"x_fluxora-attempt": "9"}`, `"x_fluxora-attempt" may not be set: x-fluxora-* headers are the worker's`},
	{`{"Content_Type": "text/plain"}`, `"Content_Type" may not be set: the worker sets it`},
	{`{"transfer_encoding": "chunked"}`, `"transfer_encoding" may not be set: it is a hop-by-hop header`},
	{`{"Proxy_Authorization": "Basic x"}`, `"Proxy_Authorization" may not be set: it is a hop-by-hop header`},
	{`{"Keep_Alive": "1"}`, `"Keep_Alive" may not be set: it is a hop-by-hop header`},
	// Not reserved, folded or not; two names that differ by "_" and "-"
	// are two headers, as before.
	{`{"x_trace": "1", "x-trace": "2", "Webhooks_Id": "x", "X_Fluxora": "y"}`, ""},
	{`{"traceparent": "00-a\r\nx-fluxora-event: forged"}`, `"traceparent": the value must be a string without CR, LF or control characters`},
	{`{"traceparent": "a\nb"}`, `"traceparent": the value must be a string without CR, LF or control characters`},
	{`{"x-tab": "a\tb"}`, `"x-tab": the value must be a string without CR, LF or control characters`},
	{`{"x-del": "a\u007fb"}`, `"x-del": the value must be a string without CR, LF or control characters`},
	{`{"x-c1": "a\u0085b"}`, `"x-c1": the value must be a string without CR, LF or control characters`},
	{`{"x-trace": "1", "X-Trace": "2"}`, `"X-Trace" and "x-trace" are the same header (names are case-insensitive)`},
	// Several problems: the first in jsonb's order (shorter names first) is named.
	{`{"Host": "h", "TE": "x"}`, `"TE" may not be set: it is a hop-by-hop header`},
	{`{"x-long-name": "a\nb", "bad name": "x"}`, `"bad name": a header name must be an HTTP token`},
}

// The database refuses exactly the headers the worker's sender and the
// producer kit refuse, with the same text, so that a row the CHECK let in
// is always sent, and a producer's refusal comes before the round trip.
// The worker sees the object as the database returns it (jsonb::text).
func TestHeaderRulesMatchTheWorkers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, tc := range headerCases {
		var problem *string
		var text string
		err := db.Pool.QueryRow(context.Background(), "SELECT webhook_headers_problem($1::jsonb), $1::jsonb::text", tc.json).Scan(&problem, &text)
		if err != nil {
			t.Fatalf("%.60s: %v", tc.json, err)
		}
		if got := deref(problem); got != tc.problem {
			t.Errorf("%.60s: the database says %q, want %q", tc.json, got, tc.problem)
		}
		fields, err := eventheaders.Parse([]byte(text))
		if err == nil {
			err = eventheaders.Check(fields)
		}
		if got := errText(err); got != deref(problem) {
			t.Errorf("%.60s: the worker says %q, the database %q", tc.json, got, deref(problem))
		}
		m, ok := stringMap(text)
		if !ok {
			continue // not an object of strings: the kit cannot express it
		}
		got := errText(producer.ValidateHeaders(m))
		if got != "" && !strings.HasPrefix(got, "producer: invalid headers: ") {
			t.Errorf("%.60s: the kit says %q", tc.json, got)
		}
		if got = strings.TrimPrefix(got, "producer: invalid headers: "); got != deref(problem) {
			t.Errorf("%.60s: the kit says %q, the database %q", tc.json, got, deref(problem))
		}
	}
}

// Every refused value is refused at insert, by a plain INSERT and by
// webhook_enqueue, with the constraint's name and a message that names the
// column and the header; nothing is stored.
func TestHeadersAreCheckedAtInsert(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for _, tc := range headerCases {
		for _, stmt := range []string{
			"INSERT INTO webhook_outbox (event_type, payload, headers) VALUES ('e', '{\"k\": 1}', $1::jsonb)",
			"SELECT webhook_enqueue('e', '{\"k\": 1}', NULL, $1::jsonb)",
		} {
			_, err := db.Pool.Exec(ctx, stmt, tc.json)
			if tc.problem == "" {
				if err != nil {
					t.Errorf("%.60s: %.30s: %v", tc.json, stmt, err)
				}
				continue
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "webhook_outbox_headers_valid" ||
				pgErr.Message != "webhook_outbox.headers: "+tc.problem || pgErr.Detail != "" {
				t.Errorf("%.60s: %.30s: got %v, want %q", tc.json, stmt, err, "webhook_outbox.headers: "+tc.problem)
			}
		}
	}
	accepted := 0
	for _, tc := range headerCases {
		if tc.problem == "" {
			accepted++
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE headers IS NOT NULL"); n != 2*accepted {
		t.Fatalf("%d rows with headers, want %d", n, 2*accepted)
	}
	// An update is checked too, and NULL (every producer's plain INSERT)
	// is no headers.
	db.Insert(t, "e", `{}`)
	_, err := db.Pool.Exec(ctx, `UPDATE webhook_outbox SET headers = '{"Host": "x"}' WHERE headers IS NULL`)
	if err == nil || !strings.Contains(err.Error(), `"Host" may not be set`) {
		t.Fatalf("update to a refused header: %v", err)
	}
}

// webhook_enqueue keeps its calls of before (two and three arguments,
// positional or named) and takes the headers by name too.
func TestEnqueueFunctionTakesHeaders(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, "INSERT INTO webhook_endpoints (name, url, secret) VALUES ('billing', 'https://hooks.example.com/', 'whsec_x')"); err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{
		"SELECT webhook_enqueue('e', '{}')",
		"SELECT webhook_enqueue('e', '{}', 'billing')",
		"SELECT webhook_enqueue('e', '{}', p_endpoint => 'billing')",
		`SELECT webhook_enqueue('e', '{}', p_headers => '{"traceparent": "t1"}')`,
		`SELECT webhook_enqueue('e', '{}', 'billing', '{"traceparent": "t2"}')`,
	} {
		if _, err := db.Pool.Exec(ctx, call); err != nil {
			t.Errorf("%s: %v", call, err)
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE headers->>'traceparent' = 't2' AND endpoint_id IS NOT NULL`); n != 1 {
		t.Fatalf("%d targeted rows with headers", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM pg_proc WHERE proname = 'webhook_enqueue'`); n != 1 {
		t.Fatalf("%d webhook_enqueue functions, want 1", n)
	}
}

// stringMap decodes a JSON object of string values.
func stringMap(text string) (map[string]string, bool) {
	var raw map[string]any
	if json.Unmarshal([]byte(text), &raw) != nil || raw == nil {
		return nil, false
	}
	m := make(map[string]string, len(raw))
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		m[k] = s
	}
	return m, true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
