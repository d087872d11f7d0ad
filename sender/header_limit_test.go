package sender_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fluxora/webhook-worker/sender"
)

// headerMarker opens the huge header's value; no Result.Error may show it.
const headerMarker = "hostile-header-value"

// hugeHeaders answers 200 with one header whose value is n bytes long,
// streamed over the hijacked connection from a small reused buffer.
func hugeHeaders(w http.ResponseWriter, r *http.Request, n int) {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, bw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, err = bw.WriteString("HTTP/1.1 200 OK\r\nX-Huge: " + headerMarker)
	chunk := bytes.Repeat([]byte{'a'}, 4096)
	for n > 0 && err == nil {
		k := min(n, len(chunk))
		_, err = bw.Write(chunk[:k])
		n -= k
	}
	if err == nil {
		_, _ = bw.WriteString("\r\nContent-Length: 0\r\nConnection: close\r\n\r\n") // the connection is not reused
		_ = bw.Flush()
	}
}

// A consumer answering with more response headers than the limit fails the
// attempt as Retryable with the limit named and the headers not echoed; the
// Sender's next request, answered normally, is delivered.
func TestHugeResponseHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		limit     int64 // Config.MaxResponseHeaderBytes
		huge, ok  int   // header value sizes over and within the limit
		wantError string
	}{
		{"default limit", 0, 1 << 20, 32 << 10, "response headers exceeded 65536 bytes"},
		{"configured limit", 4096, 8 << 10, 2 << 10, "response headers exceeded 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var size atomic.Int64
			size.Store(int64(tc.huge))
			b := startServer(t, func(w http.ResponseWriter, r *http.Request) {
				if n := size.Load(); n > 0 {
					hugeHeaders(w, r, int(n))
				} // else an ordinary 200
			}, nil)
			s := newSender(t, b.srv.URL+"/hook?"+leakQuery, func(c *sender.Config) { c.MaxResponseHeaderBytes = tc.limit })

			res := s.Send(t.Context(), testRequest())
			if res.Outcome != sender.Retryable || res.Status != 0 || res.Error != tc.wantError {
				t.Fatalf("huge headers: Send = %+v, want retryable %q", res, tc.wantError)
			}
			assertNoLeak(t, res.Error)
			if strings.Contains(res.Error, headerMarker) || strings.Contains(res.Error, "aaaa") {
				t.Fatalf("error text %q echoes the response headers", res.Error)
			}

			size.Store(int64(tc.ok))
			if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered || res.Status != http.StatusOK {
				t.Fatalf("headers within the limit: Send = %+v, want delivered", res)
			}
			size.Store(0)
			if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered || res.Status != http.StatusOK {
				t.Fatalf("next normal response: Send = %+v, want delivered", res)
			}
			if n := b.hits.Load(); n != 3 {
				t.Fatalf("server saw %d requests, want 3", n)
			}
		})
	}
}
