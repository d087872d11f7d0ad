package sender_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/egress"
	"github.com/fluxora/webhook-worker/internal/refusingproxy"
	"github.com/fluxora/webhook-worker/sender"
)

// Behind a proxy the worker resolves nothing, yet every forbidden IP
// literal, however it is spelled (Unicode digits and dots that the HTTP
// client maps to ASCII, IPv6 forms that embed IPv4), is refused before the
// proxy is asked for anything: the attempt is Permanent, naming the guard,
// and no CONNECT arrives. A public address and a name are asked for as the
// client spells them on the wire (ASCII).
func TestProxyNeverAskedForAForbiddenSpelling(t *testing.T) {
	t.Parallel()
	proxy := refusingproxy.New(t)
	pu, _ := url.Parse(proxy.URL())
	guard := egress.New(egress.Config{DenyLoopback: true})
	send := func(raw string) sender.Result {
		s, err := sender.New(sender.Config{URL: raw, Secret: []byte("k"), Timeout: 5 * time.Second, Proxy: pu, Control: guard.Control})
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		defer s.Close()
		return s.Send(context.Background(), sender.Request{DeliveryID: "d", EventType: "e", Attempt: 1, Payload: []byte(`{}`)})
	}
	for _, raw := range []string{
		"https://10.0.0.①/", "https://１０．０．０．１/", "https://169.254.169.②⑤④/", "https://10。0。0。1:8443/x",
		"https://10｡0｡0｡1/", "https://⑩.0.0.1/", "https://０ｘＡ９ＦＥＡ９ＦＥ/", "https://127.0.0.1\u00ad/",
		"https://[::127.0.0.1]/", "https://[::a9fe:a9fe]/", "https://[::ffff:0:a00:1]/", "https://[64:ff9b::a9fe:a9fe]/",
		"https://[64:ff9b:1::a00:1]/", "https://[2002:a9fe:a9fe::1]/", "https://[::ffff:169.254.169.254]/",
		"https://localhost/", "http://LOCALHOST:8080/", "https://api.localhost./", "https://ｌｏｃａｌｈｏｓｔ/",
	} {
		res := send(raw)
		if res.Outcome != sender.Permanent || !strings.Contains(res.Error, "egress guard: refused") {
			t.Errorf("%s: %+v, want Permanent, refused by the guard", raw, res)
		}
	}
	if got := proxy.Seen(); len(got) != 0 {
		t.Fatalf("the proxy was asked for %q", got)
	}
	for raw, want := range map[string]string{
		"https://８.８.８.８/":             "CONNECT 8.8.8.8:443",
		"https://bücher.example:8443/": "CONNECT xn--bcher-kva.example:8443",
	} {
		if res := send(raw); res.Outcome == sender.Delivered {
			t.Errorf("%s: delivered through a proxy that refuses everything", raw)
		}
		if got := proxy.Seen(); len(got) == 0 || got[len(got)-1] != want {
			t.Errorf("%s: the proxy saw %q, want %q last", raw, got, want)
		}
	}
}
