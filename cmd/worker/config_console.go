package main

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// hostList parses a comma-separated list of host names, IP addresses or
// host:port ("console.example.com,10.1.2.3:8089,[fd00::1]").
func (e *env) hostList(name string) []string {
	var out []string
	for _, f := range strings.Split(e.getenv(name), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		host := f
		if h, port, err := net.SplitHostPort(f); err == nil {
			if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
				e.fail(name, "%q: the port must be a number from 1 to 65535", f)
				continue
			}
			host = h
		}
		if !validHostName(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")) {
			e.fail(name, "%q is not a host name, IP address or host:port (comma-separated, no scheme or path)", f)
			continue
		}
		out = append(out, f)
	}
	return out
}

// validHostName: an IP address, or dot-separated labels of letters, digits
// and hyphens.
func validHostName(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// consoleHosts are the host names the console answers to: those of
// WEBHOOK_CONSOLE_HOSTS and the host of its listen address, unless that
// is a wildcard (0.0.0.0, ::, empty), which names no host.
func consoleHosts(c consoleEnv) []string {
	hosts := append([]string(nil), c.Hosts...)
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil || host == "" {
		return hosts
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsUnspecified() {
		return hosts
	}
	return append(hosts, host)
}

// consoleURL reads WEBHOOK_CONSOLE_URL, the console's base URL as the
// operators reach it (say https://console.example.com/webhooks), written
// into the operator events as console_url: an absolute http or https URL
// without user information, query or fragment (an event must carry no
// credential and no query), its trailing slash dropped. Unset: "".
func (e *env) consoleURL(name string) string {
	v := strings.TrimSpace(e.getenv(name))
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		e.fail(name, "must be an absolute http:// or https:// URL such as https://console.example.com")
	case u.User != nil:
		e.fail(name, "must not hold user information (the events carrying it reach consumers)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		e.fail(name, "must have no query or fragment")
	default:
		return strings.TrimSuffix(u.String(), "/")
	}
	return ""
}
