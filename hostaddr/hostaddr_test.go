package hostaddr_test

import (
	"testing"

	"github.com/fluxora/webhook-worker/hostaddr"
)

// Cases is the table shared with the SQL rules' test (sql/url_rules_test.go
// reads it through HostCases): host, the address it means ("" for a name),
// or "invalid".
var cases = hostaddr.HostCases

func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range cases {
		a, ok, err := hostaddr.Parse(c.Host)
		got := ""
		switch {
		case err != nil:
			got = "invalid"
		case ok:
			got = a.String()
		}
		if got != c.Want {
			t.Errorf("Parse(%q) = %q, want %q", c.Host, got, c.Want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, c := range cases {
		f.Add(c.Host)
	}
	f.Fuzz(func(t *testing.T, host string) {
		a, ok, err := hostaddr.Parse(host)
		if err != nil && ok {
			t.Fatalf("Parse(%q): both an address and an error", host)
		}
		if ok {
			// The canonical form reads back as itself.
			b, ok2, err2 := hostaddr.Parse(a.String())
			if err2 != nil || !ok2 || b != a {
				t.Fatalf("Parse(%q) = %s, which reads back as %s, %v, %v", host, a, b, ok2, err2)
			}
		}
	})
}
