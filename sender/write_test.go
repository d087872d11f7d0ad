package sender_test

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/fluxora/webhook-worker/sender"
)

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A request goes out in one write, headers and body together: net/http
// flushes the headers on their own before a body it does not know to be
// in memory, which cost two writes, two TCP segments and two reads at the
// consumer per delivery (BenchmarkSend shows the difference).
func TestSendWritesARequestInOneWrite(t *testing.T) {
	t.Parallel()
	var writes atomic.Int64
	dialer := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}}
	t.Cleanup(tr.CloseIdleConnections)
	s, _ := setup(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
		func(c *sender.Config) { c.Transport = tr })
	for i := range 3 { // the first on a new connection, the others reusing it
		before := writes.Load()
		if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered {
			t.Fatalf("request %d: Send = %+v, want delivered", i+1, res)
		}
		if n := writes.Load() - before; n != 1 {
			t.Errorf("request %d went out in %d writes, want 1", i+1, n)
		}
	}
}
