package main

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/fluxora/webhook-worker/egress"
)

// metricsAddr reads WEBHOOK_METRICS_ADDR: host:port or :port, the port a
// number from 0 (any free one) to 65535; "off" disables the server; unset
// is metricsAddrDefault.
func (e *env) metricsAddr(name string) string {
	v := strings.TrimSpace(e.getenv(name))
	switch v {
	case "":
		return metricsAddrDefault
	case "off":
		return ""
	}
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		e.fail(name, "must be host:port or :port with a port from 0 to 65535, or off, got %q", v)
	}
	return v
}

// egressAllow parses WEBHOOK_EGRESS_ALLOW, a comma-separated list of CIDRs
// ("10.0.0.0/8,fd12::/16"; a bare address is its own /32 or /128), and
// refuses the entries that cannot do what they say: loopback (which
// WEBHOOK_EGRESS_ALLOW_LOOPBACK alone decides), an always-refused range
// (unspecified, link-local, multicast, broadcast), and, unless all
// (WEBHOOK_EGRESS_ALLOW_ALL=true), a prefix wider than 10.0.0.0/8 or
// fc00::/7, such as 0.0.0.0/0 or ::/0.
func (e *env) egressAllow(name string, all bool) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range strings.Split(e.getenv(name), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				e.fail(name, "must be comma-separated CIDRs (e.g. 10.0.0.0/8,fd12::/16), got %q", f)
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		p = egress.UnmapPrefix(p)
		switch class := egress.Unopenable(p); {
		case class == egress.ClassLoopback:
			e.fail(name, "%s is loopback, which this list cannot open: loopback is allowed unless WEBHOOK_EGRESS_ALLOW_LOOPBACK=false; remove %q", p, f)
		case class != "":
			e.fail(name, "%s is %s, which the egress guard always refuses: it can never be allowed; remove %q", p, class, f)
		case egress.Widest(p) && !all:
			e.fail(name, "%s opens several private ranges at once (all of them for 0.0.0.0/0 and ::/0): list the ranges meant (e.g. 10.1.0.0/16), or set WEBHOOK_EGRESS_ALLOW_ALL=true to confirm %q", p, f)
		default:
			out = append(out, p)
		}
	}
	return out
}
