package sender

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	secret := []byte("whsec_test")
	s, err := New(Config{URL: "https://example.com/hook", Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	secret[0] = 'X'
	if string(s.secret) != "whsec_test" {
		t.Error("New kept the caller's Secret slice instead of a copy")
	}
	if s.timeout != TimeoutDefault || s.now == nil {
		t.Errorf("timeout = %v (want %v), now set = %v", s.timeout, TimeoutDefault, s.now != nil)
	}
	tr, ok := s.transport.(*http.Transport)
	if !ok {
		t.Fatalf("default transport is %T, want *http.Transport", s.transport)
	}
	switch {
	case tr.Proxy != nil:
		t.Error("default transport uses a proxy")
	case tr.TLSClientConfig == nil || tr.TLSClientConfig.InsecureSkipVerify:
		t.Error("default transport does not verify certificates")
	case tr.MaxIdleConnsPerHost != MaxConnsDefault || tr.MaxConnsPerHost != MaxConnsDefault || tr.MaxIdleConns != MaxConnsDefault:
		t.Errorf("connection limits %d/%d/%d, want %d", tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost, MaxConnsDefault)
	case tr.DisableKeepAlives:
		t.Error("keep-alive disabled")
	}

	s, err = New(Config{URL: "https://example.com/hook", Secret: secret, MaxConns: 8, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if tr := s.transport.(*http.Transport); tr.MaxIdleConnsPerHost != 8 || s.timeout != time.Second {
		t.Errorf("MaxConns 8, Timeout 1s gave %d, %v", tr.MaxIdleConnsPerHost, s.timeout)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		wantLen  int
	}{
		{"Short", "http 503", 8},
		{"Exact", strings.Repeat("a", MaxErrorTextBytes), MaxErrorTextBytes},
		{"Long", strings.Repeat("a", 2000), MaxErrorTextBytes},
		{"RuneBoundary", strings.Repeat("a", MaxErrorTextBytes-1) + "é", MaxErrorTextBytes - 1},
	}
	for _, tt := range tests {
		got := truncate(tt.in)
		if len(got) != tt.wantLen || !utf8.ValidString(got) || !strings.HasPrefix(tt.in, got) {
			t.Errorf("%s: truncate gave %d bytes (valid UTF-8 %v), want %d", tt.name, len(got), utf8.ValidString(got), tt.wantLen)
		}
	}
}

func TestSignerMatchesSign(t *testing.T) {
	t.Parallel()
	s, err := New(Config{URL: "https://example.com/hook", Secret: []byte("whsec_test")})
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []int64{0, 1700000000, -1, 1<<63 - 1} {
		sg := s.signers.Get().(*signer)
		tsText, sig := sg.sign(ts, []byte(`{"a":1}`))
		s.signers.Put(sg)
		if want := Sign([]byte("whsec_test"), ts, []byte(`{"a":1}`)); sig != want || tsText == "" {
			t.Errorf("ts %d: pooled signer gave %q, %q; want signature %q", ts, tsText, sig, want)
		}
	}
}
