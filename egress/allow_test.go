package egress_test

import (
	"net/netip"
	"testing"

	"github.com/fluxora/webhook-worker/egress"
)

// What an entry of Config.Allow can open, judged on prefixes alone.
func TestUnopenableAndWidest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix, class string
		widest        bool
	}{
		{"127.0.0.1/32", egress.ClassLoopback, false},
		{"127.0.0.0/8", egress.ClassLoopback, false},
		{"127.1.0.0/16", egress.ClassLoopback, false},
		{"::1/128", egress.ClassLoopback, false},
		{"::ffff:127.0.0.1/128", egress.ClassLoopback, false},
		{"0.0.0.0/32", egress.ClassUnspecified, false},
		{"0.0.0.0/8", egress.ClassUnspecified, false},
		{"::/128", egress.ClassUnspecified, false},
		{"169.254.169.254/32", egress.ClassLinkLocal, false},
		{"fe80::/10", egress.ClassLinkLocal, false},
		{"224.0.0.0/4", egress.ClassMulticast, true}, // wide, but opens nothing
		{"255.255.255.255/32", egress.ClassBroadcast, false},
		// Opens something (or is a plain public range): no class.
		{"10.0.0.0/8", "", false},
		{"10.1.2.3/32", "", false},
		{"fc00::/7", "", false},
		{"fd12::/16", "", false},
		{"::ffff:10.0.0.0/104", "", false},
		{"126.0.0.0/7", "", true}, // 126/8 is public
		{"0.0.0.0/7", "", true},   // wider than unspecified
		{"0.0.0.0/0", "", true},
		{"::/0", "", true},
		{"::/127", "", false}, // :: and ::1: no single range holds it
		{"fc00::/6", "", true},
		{"::ffff:0.0.0.0/96", "", true},
	} {
		p := netip.MustParsePrefix(tc.prefix)
		if got := egress.Unopenable(p); got != tc.class {
			t.Errorf("Unopenable(%s) = %q, want %q", tc.prefix, got, tc.class)
		}
		if got := egress.Widest(p); got != tc.widest {
			t.Errorf("Widest(%s) = %v, want %v", tc.prefix, got, tc.widest)
		}
	}
	if got := egress.UnmapPrefix(netip.MustParsePrefix("::ffff:10.1.0.0/112")); got.String() != "10.1.0.0/16" {
		t.Errorf("UnmapPrefix = %s", got)
	}
}
