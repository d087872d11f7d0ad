package sender

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// FuzzValidateURL is an internal test so that it can check that every error
// is one of the fixed texts, which cannot echo credentials.
func FuzzValidateURL(f *testing.F) {
	for _, seed := range []string{"", "https://example.com", "http://localhost:8080/x?y=1",
		"http://127.0.0.1", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://example.com",
		"ftp://localhost", "http://user:pass@localhost/", "https://@example.com", "https://x/#f",
		"/rel", "https:opaque", "https://:1", "https://h:0", "https://h:65536", "http://[fe80::1%25lo]/",
		"HTTP://LOCALHOST", "http://localhost./", "\x00", "https://%zz"} {
		f.Add(seed)
	}
	fixed := []error{errURLEmpty, errURLMalformed, errURLNotAbsolute, errURLScheme,
		errURLNoHost, errURLPort, errURLUserinfo, errURLFragment}
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
