// Package hostaddr is the one rule for what the host of an endpoint URL is:
// a name, to be resolved, or an IP address, whatever its spelling. It reads
// IPv4 the way browsers do (the WHATWG URL Standard's host parser):
// "127.0.0.1", "127.000.000.001" and "0177.0.0.1" (octal), "0x7f.1" (hex),
// "2130706433" (one number) and "127.1" (fewer parts) all mean 127.0.0.1,
// and a host whose last label is a number but that is no IPv4 address
// ("example.123", "1.2.3.256") is no host at all. The worker's URL rules
// (sender.ValidateURL, and webhook_url_problem in the database, tested side
// by side), its dialer and its egress guard all use this reading, so no
// endpoint host ever needs DNS to learn that it was an IP address, and no
// spelling slips an address past the guard.
//
// A host written with other characters than ASCII is first mapped as Go's
// HTTP client maps it before it dials or asks a proxy to CONNECT: IDNA
// (UTS #46) with the Lookup profile of golang.org/x/net/idna, the profile
// net/http uses. So "１０．０．０．１", "10.0.0.①" and "10。0。0。1" are
// 10.0.0.1 here as they are on the wire; a non-ASCII host that cannot be
// mapped is refused (the client would send it raw, and it would mean
// whatever the resolver or proxy makes of it).
//
// It imports the standard library and golang.org/x/net/idna (which the
// standard library itself vendors for net/http), so that every package may
// share it.
package hostaddr

import (
	"errors"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
)

// ErrInvalid is returned for a host that ends in a number but is not an
// IPv4 address.
var ErrInvalid = errors.New("is not a valid host: it ends in a number but is not an IPv4 address")

// ErrNotIPv6 is returned for a bracketed host (or one with a colon) that is
// not an IPv6 address, or has a zone.
var ErrNotIPv6 = errors.New("is not a valid host: not an IPv6 address")

// ErrEmptyLabel is returned for a host with an empty label ("a..b",
// ".a"); one trailing dot is allowed.
var ErrEmptyLabel = errors.New("is not a valid host: it has an empty label")

// ErrIDNA is returned for a host with characters other than ASCII that
// IDNA cannot map (a disallowed character, or one that maps to ASCII
// punctuation, such as "⒈" to "1." or "：" to ":").
var ErrIDNA = errors.New("is not a valid host: not a valid internationalized name")

// Host is a URL host as Go's HTTP client will use it.
type Host struct {
	// Name is the host the client dials or names in CONNECT and Host: an
	// IP address in its canonical form (IPv6 without brackets), else the
	// name, mapped to ASCII by IDNA when it was not ASCII (an ASCII name is
	// left as written: the client does not change it either).
	Name string
	// Addr is the address of an IP host, in any spelling; invalid for a
	// name, which is left to DNS.
	Addr netip.Addr
}

// Canonical reads host, the host of a URL without its port (an IPv6
// address with or without its brackets), as the HTTP client will use it:
// mapped by IDNA when it is not ASCII, then read as an IP address in every
// spelling. It is the one reading of a host: the URL rules, the dialer and
// the egress guard all judge what it returns. A zone ("fe80::1%eth0"), an
// empty label and a host that ends in a number but is no IPv4 address are
// refused.
func Canonical(host string) (Host, error) {
	if strings.HasPrefix(host, "[") || strings.Contains(host, ":") {
		h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return Host{}, ErrNotIPv6
		}
		return Host{Name: a.String(), Addr: a}, nil
	}
	name, err := clientName(host)
	if err != nil {
		return Host{}, err
	}
	h := strings.ToLower(name)
	if strings.HasPrefix(h, ".") || strings.Contains(h, "..") {
		return Host{}, ErrEmptyLabel
	}
	if !endsInNumber(h) {
		return Host{Name: name}, nil
	}
	a, ok := parseIPv4(h)
	if !ok {
		return Host{}, ErrInvalid
	}
	return Host{Name: a.String(), Addr: a}, nil
}

// clientName is host as net/http sends it: unchanged when ASCII, else
// idna.Lookup.ToASCII's result. net/http falls back to the raw host when
// the mapping fails; here that is refused instead.
func clientName(host string) (string, error) {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			a, err := idna.Lookup.ToASCII(host)
			if err != nil || a == "" { // "" when every character is one IDNA drops
				return "", ErrIDNA
			}
			return a, nil
		}
	}
	return host, nil
}

// endsInNumber is the standard's "ends in a number" test: the last label
// (after dropping one empty label from a trailing dot) is all digits, or
// 0x followed by hex digits.
func endsInNumber(host string) bool {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" {
		if len(parts) == 1 {
			return false
		}
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return true
	}
	rest, hex := strings.CutPrefix(last, "0x")
	return hex && strings.Trim(rest, "0123456789abcdef") == ""
}

// parseIPv4 is the standard's IPv4 parser: up to four parts, each decimal,
// octal (a leading 0) or hex (0x), every part but the last at most 255 and
// the last filling the bytes that remain.
func parseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var n uint64
	for i, p := range parts {
		v, ok := number(p)
		last := i == len(parts)-1
		if !ok || (!last && v > 255) || (last && v >= 1<<(8*(5-len(parts)))) {
			return netip.Addr{}, false
		}
		if last {
			n += v
		} else {
			n += v << (8 * (3 - i))
		}
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// number reads one IPv4 part. Values past 2^32 are reported as 2^32, which
// no part may be.
func number(p string) (uint64, bool) {
	base, digits := uint64(10), p
	switch {
	case p == "":
		return 0, false
	case strings.HasPrefix(p, "0x"):
		base, digits = 16, p[2:]
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	var v uint64
	for _, c := range digits {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = min(v*base+d, 1<<32)
	}
	return v, true
}
