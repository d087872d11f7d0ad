// Package egress decides which addresses the worker may connect to: the
// SSRF guard. Its Control function runs on every address a dialer is about
// to connect to, after DNS, so a hostname that resolves (or re-resolves) to
// a forbidden address is refused before a packet is sent.
//
// Always refused: link-local (169.254.0.0/16, fe80::/10, cloud metadata
// included, and fd00:ec2::254), unspecified (0.0.0.0/8, ::), multicast,
// broadcast. Refused unless listed in Config.Allow: private (10/8,
// 172.16/12, 192.168/16), carrier-grade NAT (100.64/10), benchmarking
// (198.18/15), unique-local (fc00::/7) and the other special-purpose
// ranges of IANA's registries (documentation, reserved 240/4, AS112,
// IETF protocol assignments, IPv6 outside global unicast 2000::/3 and the
// special ranges inside it). Loopback is allowed unless
// Config.DenyLoopback.
//
// An IPv6 address that embeds an IPv4 one is judged as that IPv4 address
// too, the stricter answer winning: IPv4-mapped (::ffff:0:0/96),
// IPv4-compatible (::/96), SIIT (::ffff:0:0:0/96), NAT64 (64:ff9b::/96)
// and 6to4 (2002::/16). The local-use NAT64 prefix (64:ff9b:1::/48) is
// judged by the IPv4 in its last 32 bits and is refused unless allowed
// even when that is public: a local translator may put the IPv4 address
// elsewhere, so no reading of it is sure.
//
// Written here (a few dozen lines over net/netip) rather than taken from a
// library: the classes, Config.Allow and the embedded IPv4 forms are the
// contract's own. A test checks that every prefix of code.dny.dev/ssrf's
// IANA-derived lists is refused here, so the table cannot fall behind it
// unnoticed.
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
	ClassReserved    = "reserved"
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
	// refusable are refused unless Config.Allow lists them.
	refusable = []struct {
		p     netip.Prefix
		class string
	}{
		{netip.MustParsePrefix("10.0.0.0/8"), ClassPrivate},
		{netip.MustParsePrefix("172.16.0.0/12"), ClassPrivate},
		{netip.MustParsePrefix("192.168.0.0/16"), ClassPrivate},
		{netip.MustParsePrefix("100.64.0.0/10"), ClassCGNAT},
		{netip.MustParsePrefix("198.18.0.0/15"), ClassBenchmark},
		{netip.MustParsePrefix("fc00::/7"), ClassUniqueLocal},
		// IANA's IPv4 special-purpose registry, beyond the ranges above.
		{netip.MustParsePrefix("192.0.0.0/24"), ClassReserved},    // IETF protocol assignments
		{netip.MustParsePrefix("192.0.2.0/24"), ClassReserved},    // documentation
		{netip.MustParsePrefix("192.31.196.0/24"), ClassReserved}, // AS112
		{netip.MustParsePrefix("192.52.193.0/24"), ClassReserved}, // AMT
		{netip.MustParsePrefix("192.88.99.0/24"), ClassReserved},  // 6to4 relay anycast
		{netip.MustParsePrefix("192.175.48.0/24"), ClassReserved}, // AS112
		{netip.MustParsePrefix("198.51.100.0/24"), ClassReserved}, // documentation
		{netip.MustParsePrefix("203.0.113.0/24"), ClassReserved},  // documentation
		{netip.MustParsePrefix("240.0.0.0/4"), ClassReserved},     // reserved
		// IANA's IPv6 special-purpose registry inside 2000::/3 (outside
		// it, everything but the forms that embed IPv4 is reserved).
		{netip.MustParsePrefix("2001::/23"), ClassReserved},         // IETF protocol assignments, Teredo
		{netip.MustParsePrefix("2001:db8::/32"), ClassReserved},     // documentation
		{netip.MustParsePrefix("2620:4f:8000::/48"), ClassReserved}, // AS112
		{netip.MustParsePrefix("3fff::/20"), ClassReserved},         // documentation
		{nat64Local, ClassReserved},
	}
	globalUnicast = netip.MustParsePrefix("2000::/3")
	// The IPv6 forms whose last 32 bits are an IPv4 address. IPv4-mapped
	// (::ffff:0:0/96) is not among them: Unmap reads it first.
	last32 = []netip.Prefix{
		netip.MustParsePrefix("64:ff9b::/96"),    // NAT64, well-known prefix
		netip.MustParsePrefix("::/96"),           // IPv4-compatible (:: and ::1 excepted)
		netip.MustParsePrefix("::ffff:0:0:0/96"), // SIIT
		nat64Local,
	}
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48") // NAT64, local-use prefix
	sixTo4     = netip.MustParsePrefix("2002::/16")
)

// Config configures a Guard.
type Config struct {
	// Allow lists private, CGNAT, benchmarking, unique-local or reserved
	// ranges the worker may connect to (WEBHOOK_EGRESS_ALLOW). It never
	// opens an always-refused range. Defaults to none.
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

// class is the refused class of addr, or "" when it is allowed. The IPv4
// address addr embeds, if any, and addr itself are each judged; the first
// refusal wins, always-refused classes before the others.
func (g *Guard) class(addr netip.Addr) string {
	if !addr.IsValid() {
		return ClassInvalid
	}
	addr = addr.WithZone("").Unmap()
	candidates := []netip.Addr{addr}
	if v4, ok := Embedded(addr); ok {
		candidates = []netip.Addr{v4, addr} // the IPv4 address names the class
	}
	for _, a := range candidates {
		for _, r := range always {
			if r.p.Contains(a) {
				return r.class
			}
		}
	}
	for _, a := range candidates {
		if class := g.refusable(a); class != "" {
			return class
		}
	}
	return ""
}

// refusable is the class of a, judged alone, when it is loopback and
// loopback is denied, or refusable and not allowed; else "".
func (g *Guard) refusable(a netip.Addr) string {
	if a.IsLoopback() {
		if g.cfg.DenyLoopback {
			return ClassLoopback
		}
		return ""
	}
	class := ""
	for _, r := range refusable {
		if r.p.Contains(a) {
			class = r.class
			break
		}
	}
	if _, embeds := Embedded(a); class == "" && a.Is6() && !globalUnicast.Contains(a) && !embeds {
		class = ClassReserved
	}
	if class != "" && g.allowed(a) {
		return ""
	}
	return class
}

// Embedded returns the IPv4 address inside an IPv6 address that embeds
// one: NAT64 (well-known and local-use prefixes), IPv4-compatible, SIIT
// (the last 32 bits) or 6to4 (bits 16 to 47). An IPv4-mapped address is
// not read here: the guard unmaps it first. :: and ::1 embed nothing.
func Embedded(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() || a == netip.IPv6Unspecified() || a == netip.IPv6Loopback() {
		return netip.Addr{}, false
	}
	b := a.As16()
	for _, p := range last32 {
		if p.Contains(a) {
			return netip.AddrFrom4([4]byte(b[12:16])), true
		}
	}
	if sixTo4.Contains(a) {
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
