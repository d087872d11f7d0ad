package sender

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/fluxora/webhook-worker/hostaddr"
)

// The errors of ValidateURL. They are fixed texts: none of them echoes any
// part of the URL, which may hold credentials.
var (
	errURLEmpty       = errors.New("must not be empty")
	errURLMalformed   = errors.New("is not a valid URL")
	errURLNotAbsolute = errors.New("must be an absolute URL")
	errURLScheme      = errors.New("must be https (http only for a loopback host)")
	errURLNoHost      = errors.New("must have a host")
	errURLPort        = errors.New("must have a port between 1 and 65535")
	errURLUserinfo    = errors.New("must not contain credentials")
	errURLFragment    = errors.New("must not contain a fragment")
)

// ValidateURL parses raw as a consumer endpoint. It accepts absolute https
// URLs, and http URLs only when the host is a loopback address (localhost,
// 127.0.0.0/8 or ::1, in any spelling hostaddr reads as one). It refuses
// other schemes, a missing host, a host that ends in a number but is no
// IPv4 address or that IDNA cannot map (hostaddr), a port outside 1-65535, embedded credentials
// (userinfo), fragments and spaces (webhook_url_problem in the database
// applies the same rules). Its errors never quote the URL, so they are safe
// to log even when raw holds a password. The URL it returns has the host as
// the HTTP client will use it (hostaddr.Canonical): a name not in ASCII is
// mapped by IDNA ("https://bücher.example/" is
// "https://xn--bcher-kva.example/"), and an IP address in any spelling
// becomes its canonical form ("http://2130706433/" and "http://127.0.0.①/"
// are "http://127.0.0.1/"), so what is judged is what is dialled, or named
// to a proxy in CONNECT.
func ValidateURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errURLEmpty
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil, strings.ContainsRune(raw, ' '):
		return nil, errURLMalformed // err quotes raw; never return it
	case !u.IsAbs() || u.Opaque != "":
		return nil, errURLNotAbsolute
	case u.User != nil:
		return nil, errURLUserinfo
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, errURLFragment
	case u.Hostname() == "":
		return nil, errURLNoHost
	case !validPort(u.Port()):
		return nil, errURLPort
	case !strings.HasPrefix(u.Host, "[") && strings.Contains(authority(raw), "%"):
		return nil, errURLMalformed // a percent-encoded host would read differently here and in the database
	}
	h, err := hostaddr.Canonical(rawHost(u))
	isIP := h.Addr.IsValid()
	switch {
	case err != nil:
		return nil, err
	case u.Scheme == "https", u.Scheme == "http" && (isIP && h.Addr.Unmap().IsLoopback() || strings.EqualFold(h.Name, "localhost")):
		port := u.Port()
		u.Host = h.Name
		switch {
		case port != "":
			u.Host = net.JoinHostPort(u.Host, port)
		case h.Addr.Is6():
			u.Host = "[" + u.Host + "]"
		}
		return u, nil
	default:
		return nil, errURLScheme
	}
}

// authority is the part of raw between "://" and the path, query or
// fragment.
func authority(raw string) string {
	_, rest, _ := strings.Cut(raw, "://")
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// rawHost is u's host without its port, an IPv6 address in its brackets.
func rawHost(u *url.URL) string {
	if strings.HasPrefix(u.Host, "[") {
		return "[" + u.Hostname() + "]"
	}
	return u.Hostname()
}

// validPort reports whether p is empty (the scheme's default) or a port
// number in 1-65535.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}
