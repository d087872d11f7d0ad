package egress_test

import (
	"errors"
	"net/netip"
	"testing"

	"code.dny.dev/ssrf"

	"github.com/fluxora/webhook-worker/egress"
	"github.com/fluxora/webhook-worker/hostaddr"
)

// classOf is what g makes of a: "" for allowed, else the refused class.
func classOf(t *testing.T, g *egress.Guard, a netip.Addr) string {
	t.Helper()
	err := g.Check(a)
	if err == nil {
		return ""
	}
	var re *egress.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("Check(%s) = %v, not a RefusedError", a, err)
	}
	return re.Class
}

// Every host of the shared table that is an IP address, in any spelling,
// ASCII or not, is judged by the class the table gives it: the guard sees
// the address the HTTP client would connect to.
func TestGuardJudgesEverySpelling(t *testing.T) {
	t.Parallel()
	g := egress.New(egress.Config{DenyLoopback: true})
	for _, c := range hostaddr.HostCases {
		h, err := hostaddr.Canonical(c.Host)
		a := h.Addr
		if err != nil || !a.IsValid() {
			continue
		}
		if got := classOf(t, g, a); got != c.Class {
			t.Errorf("%q (%s): class %q, want %q", c.Host, a, got, c.Class)
		}
	}
}

// samples are addresses of p: its first and last, and a few between.
func samples(p netip.Prefix) []netip.Addr {
	p = p.Masked()
	first := p.Addr()
	b := first.AsSlice()
	last := make([]byte, len(b))
	copy(last, b)
	for i := p.Bits(); i < len(b)*8; i++ {
		last[i/8] |= 0x80 >> (i % 8)
	}
	out := []netip.Addr{first, first.Next()}
	// The middle, and a quarter way in: set the first one or two host bits.
	for _, bits := range [][]int{{p.Bits()}, {p.Bits() + 1}, {p.Bits(), p.Bits() + 2}} {
		m := make([]byte, len(b))
		copy(m, b)
		for _, i := range bits {
			if i < len(b)*8 {
				m[i/8] |= 0x80 >> (i % 8)
			}
		}
		m[len(m)-1] |= 1
		a, _ := netip.AddrFromSlice(m)
		out = append(out, a)
	}
	l, _ := netip.AddrFromSlice(last)
	return append(out, l.Prev(), l)
}

// embeddings are the IPv6 forms of v4 that the guard reads the IPv4
// address out of.
func embeddings(v4 netip.Addr) []netip.Addr {
	b := v4.As4()
	at := func(prefix string, off int) netip.Addr {
		x := netip.MustParseAddr(prefix).As16()
		copy(x[off:], b[:])
		return netip.AddrFrom16(x)
	}
	return []netip.Addr{
		netip.AddrFrom16(v4.As16()), // IPv4-mapped
		at("64:ff9b::", 12), at("64:ff9b:1::", 12), at("::", 12), at("::ffff:0:0:0", 12), at("2002::", 2),
	}
}

// The guard refuses every prefix of code.dny.dev/ssrf's lists, which
// follow IANA's special-purpose registries, in every form that embeds an
// IPv4 address: our table is the rule, theirs checks that it misses
// nothing. The differences are deliberate: a public IPv4 address behind
// the well-known NAT64 prefix, 6to4, IPv4-compatible or SIIT is judged as
// that address (ssrf refuses NAT64 unless asked, and 6to4 and the rest
// always), and loopback is the operator's choice (refused here, as
// WEBHOOK_EGRESS_ALLOW_LOOPBACK=false has it).
func TestGuardCoversTheIANALists(t *testing.T) {
	t.Parallel()
	g := egress.New(egress.Config{DenyLoopback: true})
	theirs := ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())
	refused := func(what string, a netip.Addr) {
		if classOf(t, g, a) == "" {
			t.Errorf("%s: %s allowed, which ssrf's lists refuse", what, a)
		}
	}
	for _, p := range ssrf.IPv4DeniedPrefixes {
		for _, a := range samples(p) {
			refused(p.String(), a)
			for _, e := range embeddings(a) {
				refused(p.String()+" embedded", e)
			}
		}
	}
	sixTo4 := netip.MustParsePrefix("2002::/16")
	for _, p := range ssrf.IPv6DeniedPrefixes {
		for _, a := range samples(p) {
			if p == sixTo4 {
				continue // judged by the IPv4 inside: below
			}
			refused(p.String(), a)
		}
	}
	// Outside global unicast ssrf refuses everything; here the forms that
	// embed IPv4 are judged by their IPv4 address, which must then be one
	// ssrf allows.
	for _, p := range []netip.Prefix{
		netip.MustParsePrefix("::/3"), netip.MustParsePrefix("4000::/2"), netip.MustParsePrefix("8000::/1"),
		netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48"), netip.MustParsePrefix("::/96"),
		netip.MustParsePrefix("::ffff:0:0:0/96"), netip.MustParsePrefix("100::/64"), sixTo4,
		netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("ff00::/8"),
	} {
		for _, a := range samples(p) {
			if classOf(t, g, a) != "" {
				continue
			}
			v4, ok := egress.Embedded(a)
			if !ok || theirs.SafeAddr(v4) != nil {
				t.Errorf("%s: %s allowed (embedding %v, %v)", p, a, v4, ok)
			}
		}
	}
}

// Embedded reads the IPv4 address out of each form, and out of none else.
func TestEmbedded(t *testing.T) {
	t.Parallel()
	v4 := netip.MustParseAddr("169.254.169.254")
	for _, e := range embeddings(v4)[1:] {
		if got, ok := egress.Embedded(e); !ok || got != v4 {
			t.Errorf("Embedded(%s) = %s, %v", e, got, ok)
		}
	}
	for _, s := range []string{"::", "::1", "::ffff:169.254.169.254", "2606:4700::1111", "169.254.169.254", "64:ff9b:2::a9fe:a9fe"} {
		if got, ok := egress.Embedded(netip.MustParseAddr(s)); ok {
			t.Errorf("Embedded(%s) = %s", s, got)
		}
	}
}
