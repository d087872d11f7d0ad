package egress_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxora/webhook-worker/egress"
)

// Every range of the contract, and the mapped, NAT64 and 6to4 forms of the
// refused ones. The guard is judged on addresses: nothing is dialled.
func TestGuardClassifiesEveryRange(t *testing.T) {
	t.Parallel()
	def := egress.New(egress.Config{})
	allowPriv := egress.New(egress.Config{Allow: []netip.Prefix{
		netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd12::/16"), netip.MustParsePrefix("169.254.0.0/16"),
	}})
	noLoop := egress.New(egress.Config{DenyLoopback: true})
	for _, tc := range []struct {
		addr              string
		def, allow, noLop string // "" allowed, else the class
	}{
		// public
		{"8.8.8.8", "", "", ""},
		{"1.1.1.1", "", "", ""},
		{"2606:4700::1111", "", "", ""},
		{"::ffff:8.8.8.8", "", "", ""},
		{"64:ff9b::808:808", "", "", ""}, // NAT64 of 8.8.8.8
		{"2002:808:808::1", "", "", ""},  // 6to4 of 8.8.8.8
		{"::808:808", "", "", ""},        // IPv4-compatible 8.8.8.8
		{"::ffff:0:808:808", "", "", ""}, // SIIT 8.8.8.8
		// always refused, the allow list notwithstanding
		{"169.254.169.254", "link-local", "link-local", "link-local"},
		{"169.254.0.1", "link-local", "link-local", "link-local"},
		{"fe80::1", "link-local", "link-local", "link-local"},
		{"febf::1", "link-local", "link-local", "link-local"},
		{"fd00:ec2::254", "metadata", "metadata", "metadata"},
		{"0.0.0.0", "unspecified", "unspecified", "unspecified"},
		{"0.1.2.3", "unspecified", "unspecified", "unspecified"},
		{"::", "unspecified", "unspecified", "unspecified"},
		{"224.0.0.1", "multicast", "multicast", "multicast"},
		{"239.255.255.250", "multicast", "multicast", "multicast"},
		{"ff02::1", "multicast", "multicast", "multicast"},
		{"255.255.255.255", "broadcast", "broadcast", "broadcast"},
		{"::ffff:169.254.169.254", "link-local", "link-local", "link-local"},
		{"64:ff9b::a9fe:a9fe", "link-local", "link-local", "link-local"}, // NAT64 of 169.254.169.254
		{"2002:a9fe:a9fe::1", "link-local", "link-local", "link-local"},  // 6to4 of 169.254.169.254
		{"64:ff9b::0:0", "unspecified", "unspecified", "unspecified"},
		// refused unless allowed
		{"10.0.0.1", "private", "private", "private"},
		{"10.1.2.3", "private", "", "private"},
		{"172.16.0.1", "private", "private", "private"},
		{"172.31.255.255", "private", "private", "private"},
		{"172.32.0.1", "", "", ""},
		{"192.168.1.1", "private", "private", "private"},
		{"100.64.0.1", "cgnat", "cgnat", "cgnat"},
		{"100.127.255.255", "cgnat", "cgnat", "cgnat"},
		{"100.128.0.1", "", "", ""},
		{"198.18.0.1", "benchmarking", "benchmarking", "benchmarking"},
		{"198.19.255.255", "benchmarking", "benchmarking", "benchmarking"},
		{"fc00::1", "unique-local", "unique-local", "unique-local"},
		{"fd12::1", "unique-local", "", "unique-local"},
		{"::ffff:10.0.0.1", "private", "private", "private"},
		{"::ffff:10.1.0.1", "private", "", "private"},
		{"64:ff9b::a00:1", "private", "private", "private"},   // NAT64 of 10.0.0.1
		{"2002:c0a8:101::1", "private", "private", "private"}, // 6to4 of 192.168.1.1
		{"64:ff9b::c612:1", "benchmarking", "benchmarking", "benchmarking"},
		{"64:ff9b:1::a00:1", "private", "private", "private"},  // local-use NAT64 of 10.0.0.1
		{"64:ff9b:1::a01:1", "private", "reserved", "private"}, // 10.1/16 is allowed, the prefix is not
		{"64:ff9b:1::a9fe:a9fe", "link-local", "link-local", "link-local"},
		{"64:ff9b:1::808:808", "reserved", "reserved", "reserved"}, // the translator's own
		{"::a00:1", "private", "private", "private"},               // IPv4-compatible 10.0.0.1
		{"::a01:1", "private", "", "private"},
		{"::a9fe:a9fe", "link-local", "link-local", "link-local"},
		{"::ffff:0:a00:1", "private", "private", "private"}, // SIIT 10.0.0.1
		{"::ffff:0:a9fe:a9fe", "link-local", "link-local", "link-local"},
		{"::0.0.0.2", "unspecified", "unspecified", "unspecified"},
		// special-purpose: refused unless allowed
		{"203.0.113.7", "reserved", "reserved", "reserved"},
		{"192.0.2.1", "reserved", "reserved", "reserved"},
		{"240.0.0.1", "reserved", "reserved", "reserved"},
		{"::ffff:203.0.113.7", "reserved", "reserved", "reserved"},
		{"2001:db8::1", "reserved", "reserved", "reserved"},
		{"2001::1", "reserved", "reserved", "reserved"}, // Teredo
		{"3fff::1", "reserved", "reserved", "reserved"},
		{"100::1", "reserved", "reserved", "reserved"}, // discard-only
		{"4000::1", "reserved", "reserved", "reserved"},
		// loopback: allowed unless denied, in every form
		{"127.0.0.1", "", "", "loopback"},
		{"127.1.2.3", "", "", "loopback"},
		{"::1", "", "", "loopback"},
		{"::ffff:127.0.0.1", "", "", "loopback"},
		{"64:ff9b::7f00:1", "", "", "loopback"},
		{"2002:7f00:1::1", "", "", "loopback"},
		{"::127.0.0.1", "", "", "loopback"},
		{"::ffff:0:7f00:1", "", "", "loopback"},
	} {
		a := netip.MustParseAddr(tc.addr)
		for _, g := range []struct {
			name  string
			guard *egress.Guard
			want  string
		}{{"default", def, tc.def}, {"allow list", allowPriv, tc.allow}, {"loopback denied", noLoop, tc.noLop}} {
			err := g.guard.Check(a)
			var re *egress.RefusedError
			switch {
			case g.want == "" && err != nil:
				t.Errorf("%s %s: refused (%v), want allowed", g.name, tc.addr, err)
			case g.want != "" && (!errors.As(err, &re) || re.Class != g.want || !errors.Is(err, egress.ErrRefused)):
				t.Errorf("%s %s: %v, want refused as %s", g.name, tc.addr, err, g.want)
			}
		}
	}
}

// Control refuses by the address the dialer is about to connect to, and
// counts the refusal by class.
func TestControlRefusesAndCounts(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	g := egress.New(egress.Config{DenyLoopback: true, Registerer: reg})
	if err := g.Control("tcp4", "8.8.8.8:443", nil); err != nil {
		t.Fatalf("public address refused: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:443", "169.254.169.254:80", "[fe80::1%eth0]:80"} {
		if err := g.Control("tcp", addr, nil); !errors.Is(err, egress.ErrRefused) {
			t.Errorf("%s: %v, want refused", addr, err)
		}
	}
	if err := g.Control("tcp", "not an address", nil); !errors.Is(err, egress.ErrRefused) {
		t.Errorf("unparsable address: %v", err)
	}
	want := `
# HELP fluxora_webhook_egress_refused_total Connections the egress guard refused, by address class; each dead-letters its delivery.
# TYPE fluxora_webhook_egress_refused_total counter
fluxora_webhook_egress_refused_total{class="invalid"} 1
fluxora_webhook_egress_refused_total{class="link-local"} 2
fluxora_webhook_egress_refused_total{class="loopback"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fluxora_webhook_egress_refused_total"); err != nil {
		t.Fatal(err)
	}
}
