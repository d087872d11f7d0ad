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
// It imports only the standard library, so that every package may share it.
package hostaddr

import (
	"errors"
	"net/netip"
	"strings"
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

// Parse reads host, the host of a URL without its port (an IPv6 address
// with or without its brackets). ok is false for a name, which is left to
// DNS; for an IP address in any spelling it returns the address. A zone
// ("fe80::1%eth0") and an empty label are refused.
func Parse(host string) (addr netip.Addr, ok bool, err error) {
	if strings.HasPrefix(host, "[") || strings.Contains(host, ":") {
		h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return netip.Addr{}, false, ErrNotIPv6
		}
		return a, true, nil
	}
	host = strings.ToLower(host)
	if strings.HasPrefix(host, ".") || strings.Contains(host, "..") {
		return netip.Addr{}, false, ErrEmptyLabel
	}
	if !endsInNumber(host) {
		return netip.Addr{}, false, nil
	}
	a, ok := parseIPv4(host)
	if !ok {
		return netip.Addr{}, false, ErrInvalid
	}
	return a, true, nil
}

// Canonical is host as a dialer wants it: an IP address in its canonical
// form (IPv6 without brackets), or the name as given.
func Canonical(host string) (string, error) {
	a, ok, err := Parse(host)
	switch {
	case err != nil:
		return "", err
	case ok:
		return a.String(), nil
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
