package hostaddr_test

import (
	"testing"

	"github.com/fluxora/webhook-worker/hostaddr"
)

// Cases is the table shared with the SQL rules' test (sql/url_rules_test.go
// reads it through HostCases): host, the address it means ("" for a name),
// or "invalid".
var cases = hostaddr.HostCases

func TestCanonical(t *testing.T) {
	t.Parallel()
	for _, c := range cases {
		h, err := hostaddr.Canonical(c.Host)
		got := ""
		switch {
		case err != nil:
			got = "invalid"
		case h.Addr.IsValid():
			got = h.Addr.String()
		}
		if got != c.Want {
			t.Errorf("Canonical(%q) = %q, want %q", c.Host, got, c.Want)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	for _, c := range cases {
		f.Add(c.Host)
	}
	f.Fuzz(func(t *testing.T, host string) {
		h, err := hostaddr.Canonical(host)
		a, ok := h.Addr, h.Addr.IsValid()
		if err != nil && ok {
			t.Fatalf("Canonical(%q): both an address and an error", host)
		}
		if ok {
			// The canonical form reads back as itself.
			h2, err2 := hostaddr.Canonical(a.String())
			b, ok2 := h2.Addr, h2.Addr.IsValid()
			if err2 != nil || !ok2 || b != a {
				t.Fatalf("Canonical(%q) = %s, which reads back as %s, %v, %v", host, a, b, ok2, err2)
			}
		}
	})
}
