package sender_test

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/eventheaders"
	"github.com/fluxora/webhook-worker/sender"
)

// An event's extra headers arrive with the worker's own, values unchanged,
// and the names are sent in the case given.
func TestSendExtraHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	s, _ := setup(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	})
	req := testRequest()
	req.Headers = []eventheaders.Field{
		{Name: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{Name: "X-Correlation-Id", Value: "c-42 é"},
		{Name: "x-empty", Value: ""},
	}
	if res := s.Send(t.Context(), req); res.Outcome != sender.Delivered {
		t.Fatalf("Send = %+v", res)
	}
	h := <-got
	for _, f := range req.Headers {
		if v := h.Values(f.Name); !slices.Equal(v, []string{f.Value}) {
			t.Errorf("%s = %q, want [%q]", f.Name, v, f.Value)
		}
	}
	if h.Get("X-Fluxora-Event") != "invoice.paid" || h.Get("Content-Type") != "application/json" || h.Get("Webhook-Id") == "" {
		t.Errorf("the worker's headers changed: %v", h)
	}

	// The names as they go on the wire: the transport writes the keys of
	// the request's header map as they are.
	keys := make(chan []string, 1)
	s = newSender(t, "https://example.com/hook", func(c *sender.Config) {
		c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			keys <- slices.Sorted(maps.Keys(r.Header))
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
		})
	})
	if res := s.Send(t.Context(), req); res.Outcome != sender.Delivered {
		t.Fatalf("Send = %+v", res)
	}
	k := <-keys
	for _, name := range []string{"traceparent", "X-Correlation-Id", "x-empty"} {
		if !slices.Contains(k, name) {
			t.Errorf("header keys %v lack %q as given", k, name)
		}
	}
}

// Extra headers never replace the worker's: a request with one the rules
// refuse is Permanent, names the header, and nothing is sent.
func TestSendRefusesHeadersThatWouldOverride(t *testing.T) {
	t.Parallel()
	s, b := setup(t, status(http.StatusNoContent))
	for _, tc := range []struct{ name, value, want string }{
		{"X-Fluxora-Event", "forged", `invalid Headers: "X-Fluxora-Event" may not be set: x-fluxora-* headers are the worker's`},
		{"x-fluxora-signature", "v1=0", `"x-fluxora-signature" may not be set`},
		{"webhook-signature", "v1,AAAA", `"webhook-signature" may not be set: webhook-* headers are the worker's`},
		{"Content-Type", "text/plain", `"Content-Type" may not be set: the worker sets it`},
		{"content-length", "0", `"content-length" may not be set`},
		{"Transfer-Encoding", "chunked", `"Transfer-Encoding" may not be set: it is a hop-by-hop header`},
		{"traceparent", "a\r\nX-Fluxora-Event: forged", `"traceparent": the value must be a string without CR, LF or control characters`},
		{"bad\nname", "x", `"bad\nname": a header name must be an HTTP token`},
		{"bad\x7fname", "x", `"bad name": a header name must be an HTTP token`}, // DEL scrubbed from the text
	} {
		req := testRequest()
		req.Headers = []eventheaders.Field{{Name: "traceparent", Value: "t"}, {Name: tc.name, Value: tc.value}}
		res := s.Send(t.Context(), req)
		if res.Outcome != sender.Permanent || !strings.Contains(res.Error, tc.want) || res.Status != 0 {
			t.Errorf("%q: Send = %+v, want Permanent with %q", tc.name, res, tc.want)
		}
	}
	req := testRequest()
	req.Headers = []eventheaders.Field{{Name: "X-Trace", Value: "1"}, {Name: "x-trace", Value: "2"}}
	if res := s.Send(t.Context(), req); res.Outcome != sender.Permanent || !strings.Contains(res.Error, "same header") {
		t.Errorf("case duplicates: Send = %+v", res)
	}
	if n := b.hits.Load(); n != 0 {
		t.Fatalf("server hits = %d, want 0", n)
	}
}

// BenchmarkSendOverheadHeaders is BenchmarkSendOverhead with two extra
// headers: one more allocation than without (their values' array).
func BenchmarkSendOverheadHeaders(b *testing.B) {
	s, err := sender.New(sender.Config{URL: "https://example.com/hook", Secret: []byte(testSecret),
		Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	req := testRequest()
	req.Headers = []eventheaders.Field{{Name: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{Name: "x-correlation-id", Value: "c-42"}}
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Send(b.Context(), req); res.Outcome != sender.Delivered {
			b.Fatalf("Send = %+v", res)
		}
	}
}

// Header is what Send sends, in every family of signature headers: the
// same names in the same case and the same values, given the clock's
// second and the signatures Sign and SignStandard make. Header with no
// signatures still names a family's signature header, empty.
func TestHeaderIsWhatSendSends(t *testing.T) {
	t.Parallel()
	req := testRequest()
	req.Endpoint, req.OrderingKey, req.Sequence = "shop", "order-7", 3
	req.Headers = []eventheaders.Field{{Name: "traceparent", Value: "00-abc-01"}, {Name: "X-Correlation-Id", Value: "c-42"}}
	for _, families := range []sender.Headers{0, sender.FluxoraHeaders, sender.StandardHeaders} {
		sent := make(chan http.Header, 1)
		s := newSender(t, "https://example.com/hook", func(c *sender.Config) {
			c.Headers = families
			c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent <- r.Header
				return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
			})
		})
		if res := s.Send(t.Context(), req); res.Outcome != sender.Delivered {
			t.Fatalf("Send = %+v", res)
		}
		sig := sender.Signatures{Fluxora: sender.Sign([]byte(testSecret), testTS, req.Payload),
			Standard: sender.SignStandard(sender.StandardKey([]byte(testSecret)), req.DeliveryID, testTS, req.Payload)}
		got, want := <-sent, sender.Header(req, families, testTS, sig)
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("families %d: Send sent\n%v\nHeader gives\n%v", families, got, want)
		}
		bare := sender.Header(req, families, testTS, sender.Signatures{})
		if len(bare) != len(want) {
			t.Errorf("families %d: Header without signatures names %v, want the names of %v", families, slices.Sorted(maps.Keys(bare)), slices.Sorted(maps.Keys(want)))
		}
	}
}
