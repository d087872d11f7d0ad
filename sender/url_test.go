package sender_test

import (
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/sender"
)

func TestValidateURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw     string
		wantErr string // "" when accepted
	}{
		{"https://example.com", ""},
		{"https://example.com/hooks/in?tenant=1", ""},
		{"HTTPS://Example.COM:8443/x", ""},
		{"https://203.0.113.7/hook", ""},
		{"http://localhost", ""},
		{"http://LOCALHOST:9000/hook", ""},
		{"http://127.0.0.1:8080", ""},
		{"http://127.1.2.3/hook", ""},
		{"http://[::1]/", ""},
		{"http://[::1]:8080/hook", ""},
		{"http://[::ffff:127.0.0.1]/", ""},
		{"", "must not be empty"},
		{"http://example.com", "must be https"},
		{"http://10.0.0.1/", "must be https"},
		{"http://localhost.example.com/", "must be https"},
		{"http://0.0.0.0/", "must be https"},
		{"ftp://example.com/", "must be https"},
		{"ws://localhost/", "must be https"},
		{"file:///etc/passwd", "must have a host"},
		{"https:///path", "must have a host"},
		{"https://:443/", "must have a host"},
		{"https://example.com:0/", "must have a port"},
		{"https://example.com:65536/", "must have a port"},
		{"https://example.com:abc/", "is not a valid URL"},
		{"/relative/path", "must be an absolute URL"},
		{"example.com/hook", "must be an absolute URL"},
		{"//example.com/hook", "must be an absolute URL"},
		{"https:example.com", "must be an absolute URL"},
		{"http://user:pass@localhost/", "must not contain credentials"},
		{"https://user@example.com/", "must not contain credentials"},
		{"https://@example.com/", "must not contain credentials"},
		{"https://example.com/#frag", "must not contain a fragment"},
		{"https://example.com/#", "must not contain a fragment"},
		{"https://exa mple.com/", "is not a valid URL"},
		{"https://example.com/a b", "is not a valid URL"},
		{"https://example.com/\x7f", "is not a valid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			u, err := sender.ValidateURL(tt.raw)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ValidateURL(%q) = %v, want accepted", tt.raw, err)
			case tt.wantErr == "" && u == nil:
				t.Fatalf("ValidateURL(%q) returned a nil URL", tt.raw)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("ValidateURL(%q) accepted, want error %q", tt.raw, tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("ValidateURL(%q) = %q, want it to contain %q", tt.raw, err, tt.wantErr)
			}
		})
	}
}

func TestValidateURLHidesCredentials(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"http://user:pass@localhost/",
		"https://admin:hunter2pass@example.com/hook",
		"https://admin:pass%zz@example.com/",  // malformed escape inside the password
		"https://admin:pass@example.com:bad/", // malformed port after credentials
		"https://admin:pass@exa mple.com/",    // malformed host after credentials
		"pass:word@example.com",               // scheme-looking password
		"http://admin:pass@example.com/#frag", // two problems at once
		"ftp://admin:pass@example.com/",
	} {
		_, err := sender.ValidateURL(raw)
		if err == nil {
			t.Errorf("ValidateURL(%q) accepted", raw)
			continue
		}
		if strings.Contains(err.Error(), "pass") || strings.Contains(err.Error(), "admin") {
			t.Errorf("ValidateURL(%q) error %q echoes the credentials", raw, err)
		}
	}
}

// A host not in ASCII is read as the HTTP client will use it (IDNA, as
// net/http maps it): Unicode digits and dots are the address they map to,
// a name comes back in ASCII, and a host IDNA cannot map is refused.
func TestValidateURLMapsHostsAsTheClient(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"https://10.0.0.①/":        "10.0.0.1",
		"https://１０．０．０．１:8443/x":  "10.0.0.1:8443",
		"https://169.254.169.②⑤④/": "169.254.169.254",
		"http://127。0。0。1/":        "127.0.0.1",
		"http://127｡0｡0｡1:9/":      "127.0.0.1:9",
		"http://ｌｏｃａｌｈｏｓｔ:8080/":   "localhost:8080",
		"https://Bücher.example/":  "xn--bcher-kva.example",
		"https://ＥＸＡＭＰＬＥ.com/":     "example.com",
		"https://10.0.0.1\u00ad/":  "10.0.0.1",
	} {
		u, err := sender.ValidateURL(raw)
		if err != nil || u.Host != want {
			t.Errorf("ValidateURL(%q) = %v, %v; want host %q", raw, u, err, want)
		}
	}
	for raw, want := range map[string]string{
		"http://１０．０．０．１/":            "must be https",
		"http://[::127.0.0.1]/":       "must be https",
		"https://example.①/":          "ends in a number but is not an IPv4 address",
		"https://10.0.0⒈/":            "not a valid internationalized name",
		"https://１０．０．０．１：４４３/":       "not a valid internationalized name",
		"https://⑴.example/":          "not a valid internationalized name",
		"https://-a.ü/":               "not a valid internationalized name",
		"https://１０．．１/":              "empty label",
		"http://[::ffff:0:7f00:1]:8/": "must be https",
	} {
		if _, err := sender.ValidateURL(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateURL(%q) = %v, want %q", raw, err, want)
		}
	}
}
