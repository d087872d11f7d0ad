package sender

import (
	"errors"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
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
// 127.0.0.0/8 or ::1). It refuses other schemes, a missing host, a port
// outside 1-65535, embedded credentials (userinfo), fragments and spaces
// (webhook_url_problem in the database applies the same rules). Its errors
// never quote the URL, so they are safe to log even when raw holds a
// password.
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
	case u.Scheme == "https", u.Scheme == "http" && isLoopback(u.Hostname()):
		return u, nil
	default:
		return nil, errURLScheme
	}
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

// isLoopback reports whether host is "localhost" or a loopback IP literal
// (127.0.0.0/8, ::1, or either mapped into IPv6).
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
