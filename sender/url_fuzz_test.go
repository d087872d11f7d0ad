package sender

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/hostaddr"
)

// FuzzValidateURL is an internal test so that it can check that every error
// is one of the fixed texts, which cannot echo credentials.
func FuzzValidateURL(f *testing.F) {
	for _, seed := range []string{"", "https://example.com", "http://localhost:8080/x?y=1",
		"http://127.0.0.1", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://example.com",
		"ftp://localhost", "http://user:pass@localhost/", "https://@example.com", "https://x/#f",
		"/rel", "https:opaque", "https://:1", "https://h:0", "https://h:65536", "http://[fe80::1%25lo]/",
		"HTTP://LOCALHOST", "http://localhost./", "\x00", "https://%zz", "http://2130706433/", "https://0x7f.1:8/x",
		"http://127.000.000.001:80/", "https://example.123/", "http://[::ffff:7f00:1]:9/",
		"https://10.0.0.①/", "https://１０．０．０．１/", "https://169.254.169.②⑤④/", "http://127。0。0。1:8/",
		"http://127｡0｡0｡1/", "https://bücher.example/", "https://ｌｏｃａｌｈｏｓｔ/", "http://ｌｏｃａｌｈｏｓｔ:1/",
		"https://10.0.0⒈/", "https://example.①/", "https://１０．０．０．１：４４３/", "http://[::127.0.0.1]/",
		"https://[64:ff9b:1::a9fe:a9fe]/", "https://10.0.0.1­/"} {
		f.Add(seed)
	}
	fixed := []error{errURLEmpty, errURLMalformed, errURLNotAbsolute, errURLScheme,
		errURLNoHost, errURLPort, errURLUserinfo, errURLFragment, hostaddr.ErrInvalid, hostaddr.ErrNotIPv6, hostaddr.ErrEmptyLabel, hostaddr.ErrIDNA}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ValidateURL(raw)
		if err != nil {
			for _, e := range fixed {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("ValidateURL(%q) = %q, not one of the fixed errors", raw, err)
		}
		if u.User != nil || u.Fragment != "" || strings.Contains(raw, "#") {
			t.Fatalf("ValidateURL(%q) accepted credentials or a fragment", raw)
		}
		if u.Hostname() == "" {
			t.Fatalf("ValidateURL(%q) accepted an empty host", raw)
		}
		// The host comes back as the client uses it: ASCII (IDNA applied),
		// and an IP address in any spelling canonical, never sent to DNS.
		for i := 0; i < len(u.Host); i++ {
			if u.Host[i] >= 0x80 {
				t.Fatalf("ValidateURL(%q) returned host %q, not ASCII", raw, u.Host)
			}
		}
		if h, err := hostaddr.Canonical(rawHost(u)); err != nil || h.Addr.IsValid() && u.Hostname() != h.Addr.String() {
			t.Fatalf("ValidateURL(%q) returned host %q, not canonical (%v)", raw, u.Host, err)
		}
		if u.Scheme == "https" {
			return
		}
		ip, ipErr := netip.ParseAddr(u.Hostname())
		loopback := strings.EqualFold(u.Hostname(), "localhost") || ipErr == nil && ip.Unmap().IsLoopback()
		if u.Scheme != "http" || !loopback {
			t.Fatalf("ValidateURL(%q) accepted scheme %q host %q", raw, u.Scheme, u.Hostname())
		}
	})
}
