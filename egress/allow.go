package egress

import "net/netip"

// loopback is the loopback ranges: Config.DenyLoopback alone decides them.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// Unopenable returns the class of the range that holds all of p when
// listing p in Config.Allow can open nothing: an always-refused class
// (unspecified, link-local, metadata, multicast, broadcast), which no
// setting opens, or ClassLoopback, which Config.DenyLoopback alone
// decides. It returns "" otherwise. An IPv4-mapped prefix
// (::ffff:127.0.0.0/104) is read as its IPv4 one.
func Unopenable(p netip.Prefix) string {
	p = UnmapPrefix(p)
	within := func(r netip.Prefix) bool { return r.Bits() <= p.Bits() && r.Contains(p.Addr()) }
	for _, r := range always {
		if within(r.p) {
			return r.class
		}
	}
	for _, r := range loopback {
		if within(r) {
			return ClassLoopback
		}
	}
	return ""
}

// Widest reports whether p is wider than the widest range Config.Allow can
// open (10.0.0.0/8, fc00::/7): an IPv4 prefix shorter than /8 or an IPv6
// one shorter than /7. Such an entry, 0.0.0.0/0 or ::/0 above all, can
// open several private ranges, or all of them, at once.
func Widest(p netip.Prefix) bool {
	p = UnmapPrefix(p)
	if p.Addr().Is4() {
		return p.Bits() < 8
	}
	return p.Bits() < 7
}

// UnmapPrefix is p, masked, with an IPv4-mapped IPv6 prefix
// (::ffff:10.0.0.0/104) turned into its IPv4 one (10.0.0.0/8): the guard
// checks IPv4-mapped addresses as IPv4, so only the IPv4 form of such a
// prefix in Config.Allow matches them.
func UnmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}
