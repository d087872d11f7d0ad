package sender_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/sender"
)

// Every spelling of an IP address is the address it means, canonical in
// the URL ValidateURL returns; a host that ends in a number but is no
// IPv4 address is refused.
func TestValidateURLReadsHostsAsBrowsers(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"http://127.000.000.001/":      "127.0.0.1",
		"http://0177.0.0.1:8080/x":     "127.0.0.1:8080",
		"http://0x7f.1/":               "127.0.0.1",
		"http://2130706433:9/":         "127.0.0.1:9",
		"http://127.1/":                "127.0.0.1",
		"https://167772161/":           "10.0.0.1",
		"https://0xA9FEA9FE/":          "169.254.169.254",
		"http://[::ffff:7f00:1]:8/":    "[::ffff:127.0.0.1]:8",
		"https://Example.COM:8443/x":   "Example.COM:8443",
		"http://[0:0:0:0:0:0:0:1]/":    "[::1]",
		"https://hooks.example.com./x": "hooks.example.com.",
	} {
		u, err := sender.ValidateURL(raw)
		if err != nil || u.Host != want {
			t.Errorf("ValidateURL(%q) = %v, %v; want host %q", raw, u, err, want)
		}
	}
	for raw, want := range map[string]string{
		"http://10.1/":             "must be https",
		"http://012.0.0.1/":        "must be https",
		"https://example.123/":     "ends in a number but is not an IPv4 address",
		"https://1.2.3.256/":       "ends in a number but is not an IPv4 address",
		"https://4294967296/":      "ends in a number but is not an IPv4 address",
		"https://a..b/":            "empty label",
		"http://127.0.0.%31/":      "is not a valid URL",
		"http://[fe80::1%25eth0]/": "not an IPv6 address",
	} {
		if _, err := sender.ValidateURL(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateURL(%q) = %v, want %q", raw, err, want)
		}
	}
}

// noDNS is a resolver stub that fails the test if it is ever asked.
func noDNS(t *testing.T) func(context.Context, string, string) ([]netip.Addr, error) {
	return func(_ context.Context, _, host string) ([]netip.Addr, error) {
		t.Errorf("resolver asked for %q: an IP host must never be resolved", host)
		return nil, errors.New("no DNS in tests")
	}
}

// A request to any spelling of an IP address connects to that address,
// never asking a resolver, and says the canonical address in Host.
func TestIPSpellingsAreDialledWithoutDNS(t *testing.T) {
	t.Parallel()
	var got atomic.Value // the Host of each request; the sends are one after the other
	got.Store([]string{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(append(got.Load().([]string), r.Host))
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	for _, host := range []string{"127.000.000.001", "0x7f.1", "2130706433", "127.1", "0177.0.0.01"} {
		s, err := sender.New(sender.Config{URL: "http://" + host + ":" + port + "/hook", Secret: []byte("k"), Timeout: 5 * time.Second,
			LookupNetIP: noDNS(t)})
		if err != nil {
			t.Fatal(err)
		}
		res := s.Send(context.Background(), sender.Request{DeliveryID: "d", EventType: "e", Attempt: 1, Payload: []byte(`{}`)})
		if res.Outcome != sender.Delivered {
			t.Errorf("%s: %+v", host, res)
		}
		s.Close()
	}
	hosts := got.Load().([]string)
	if len(hosts) != 5 {
		t.Fatalf("the consumer saw %d requests, want 5", len(hosts))
	}
	for _, h := range hosts {
		if h != "127.0.0.1:"+port {
			t.Errorf("Host %q, want the canonical 127.0.0.1:%s", h, port)
		}
	}
}

// A name is resolved (here by a stub: tests never use DNS) and every
// address it resolves to goes through Control before a packet is sent.
func TestResolvedNamesGoThroughControl(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	stub := func(_ context.Context, _, host string) ([]netip.Addr, error) {
		if host != "consumer.test" {
			return nil, errors.New("unknown host " + host)
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	var seen atomic.Value
	refuseLoopback := func(_, address string, _ syscall.RawConn) error {
		seen.Store(address)
		if ap, err := netip.ParseAddrPort(address); err == nil && ap.Addr().IsLoopback() {
			return permanentRefusal{}
		}
		return nil
	}
	target := "https://consumer.test:" + u.Port() + "/hook"
	s, err := sender.New(sender.Config{URL: target, Secret: []byte("k"), Timeout: 5 * time.Second, LookupNetIP: stub, Control: refuseLoopback})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res := s.Send(context.Background(), sender.Request{DeliveryID: "d", EventType: "e", Attempt: 1, Payload: []byte(`{}`)})
	if res.Outcome != sender.Permanent || hits.Load() != 0 || seen.Load() != "127.0.0.1:"+u.Port() {
		t.Fatalf("result %+v, %d requests reached the server, Control saw %v", res, hits.Load(), seen.Load())
	}
}
