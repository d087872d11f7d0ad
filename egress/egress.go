// Package egress decides which addresses the worker may connect to: the
// SSRF guard. Its Control function runs on every address a dialer is about
// to connect to, after DNS, so a hostname that resolves (or re-resolves) to
// a forbidden address is refused before a packet is sent.
//
// Always refused: link-local (169.254.0.0/16, fe80::/10, cloud metadata
// included, and fd00:ec2::254), unspecified (0.0.0.0/8, ::), multicast,
// broadcast, and the IPv4-mapped, NAT64 (64:ff9b::/96) and 6to4
// (2002::/16) forms of any refused address. Refused unless listed in
// Config.Allow: private (10/8, 172.16/12, 192.168/16), carrier-grade NAT
// (100.64/10), benchmarking (198.18/15) and unique-local (fc00::/7)
// addresses. Loopback is allowed unless Config.DenyLoopback.
//
// Written here (a few dozen lines over net/netip) rather than taken from a
// library: the rules are the contract's own, including the embedded IPv4
// forms, and a table test covers every range.
package egress

import (
	"errors"
	"net/netip"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The classes of refused addresses: the values of RefusedError.Class and of
// the class label of fluxora_webhook_egress_refused_total.
const (
	ClassLinkLocal   = "link-local"
	ClassMetadata    = "metadata"
	ClassUnspecified = "unspecified"
	ClassMulticast   = "multicast"
	ClassBroadcast   = "broadcast"
	ClassPrivate     = "private"
	ClassCGNAT       = "cgnat"
	ClassBenchmark   = "benchmarking"
	ClassUniqueLocal = "unique-local"
	ClassLoopback    = "loopback"
	ClassInvalid     = "invalid"
)

var (
	always = []struct {
		p     netip.Prefix
		class string
	}{
		{netip.MustParsePrefix("169.254.0.0/16"), ClassLinkLocal},
		{netip.MustParsePrefix("fe80::/10"), ClassLinkLocal},
		{netip.MustParsePrefix("fd00:ec2::254/128"), ClassMetadata},
		{netip.MustParsePrefix("0.0.0.0/8"), ClassUnspecified},
		{netip.MustParsePrefix("::/128"), ClassUnspecified},
		{netip.MustParsePrefix("224.0.0.0/4"), ClassMulticast},
		{netip.MustParsePrefix("ff00::/8"), ClassMulticast},
		{netip.MustParsePrefix("255.255.255.255/32"), ClassBroadcast},
	}
	private = []struct {
		p     netip.Prefix
		class string
	}{
		{netip.MustParsePrefix("10.0.0.0/8"), ClassPrivate},
		{netip.MustParsePrefix("172.16.0.0/12"), ClassPrivate},
		{netip.MustParsePrefix("192.168.0.0/16"), ClassPrivate},
		{netip.MustParsePrefix("100.64.0.0/10"), ClassCGNAT},
		{netip.MustParsePrefix("198.18.0.0/15"), ClassBenchmark},
		{netip.MustParsePrefix("fc00::/7"), ClassUniqueLocal},
	}
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// Config configures a Guard.
type Config struct {
	// Allow lists private, CGNAT, benchmarking or unique-local ranges the
	// worker may connect to (WEBHOOK_EGRESS_ALLOW). It never opens an
	// always-refused range. Defaults to none.
	Allow []netip.Prefix
	// DenyLoopback refuses loopback addresses too
	// (WEBHOOK_EGRESS_ALLOW_LOOPBACK=false). Defaults to allowing them.
	DenyLoopback bool
	// Registerer receives fluxora_webhook_egress_refused_total. Nil: no
	// metrics.
	Registerer prometheus.Registerer
}

// Guard is the SSRF guard. Safe for concurrent use.
type Guard struct {
	cfg     Config
	refused *prometheus.CounterVec
}

// New returns a Guard.
func New(cfg Config) *Guard {
	g := &Guard{cfg: cfg}
	if cfg.Registerer != nil {
		g.refused = promauto.With(cfg.Registerer).NewCounterVec(prometheus.CounterOpts{
			Name: "fluxora_webhook_egress_refused_total",
			Help: "Connections the egress guard refused, by address class; each dead-letters its delivery.",
		}, []string{"class"})
	}
	return g
}

// RefusedError is the error of a refused dial.
type RefusedError struct {
	Class string // one of the Class constants
	Addr  netip.Addr
}

func (e *RefusedError) Error() string {
	return "egress guard: refused a " + e.Class + " address (" + e.Addr.String() + ")"
}

// Permanent reports that retrying cannot help: the sender dead-letters the
// delivery at once rather than retry into the guard.
func (e *RefusedError) Permanent() bool { return true }

// ErrRefused matches every RefusedError with errors.Is.
var ErrRefused = errors.New("egress guard: refused")

// Is makes errors.Is(err, ErrRefused) true for a RefusedError.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Check returns nil when addr may be dialled, or a *RefusedError.
func (g *Guard) Check(addr netip.Addr) error {
	if class := g.class(addr); class != "" {
		return &RefusedError{Class: class, Addr: addr}
	}
	return nil
}

// class is the refused class of addr, or "" when it is allowed.
func (g *Guard) class(addr netip.Addr) string {
	if !addr.IsValid() {
		return ClassInvalid
	}
	addr = addr.WithZone("")
	candidates := []netip.Addr{addr.Unmap()}
	if v4, ok := embedded(addr); ok {
		candidates = append(candidates, v4)
	}
	for _, a := range candidates {
		for _, r := range always {
			if r.p.Contains(a) {
				return r.class
			}
		}
	}
	for _, a := range candidates {
		if a.IsLoopback() {
			if g.cfg.DenyLoopback {
				return ClassLoopback
			}
			continue
		}
		for _, r := range private {
			if r.p.Contains(a) && !g.allowed(a) {
				return r.class
			}
		}
	}
	return ""
}

// embedded returns the IPv4 address inside a NAT64 or 6to4 address.
func embedded(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case !a.Is6() || a.Is4In6():
		return netip.Addr{}, false
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

func (g *Guard) allowed(a netip.Addr) bool {
	for _, p := range g.cfg.Allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Control is a net.Dialer Control function: it refuses, before the
// connection is attempted, an address the guard does not allow. address
// is the "ip:port" the dialer is about to connect to.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	var err error
	if ap, perr := netip.ParseAddrPort(address); perr != nil {
		err = &RefusedError{Class: ClassInvalid}
	} else {
		err = g.Check(ap.Addr())
	}
	var re *RefusedError
	if errors.As(err, &re) && g.refused != nil {
		g.refused.WithLabelValues(re.Class).Inc()
	}
	return err
}
