package console

import (
	"errors"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Bodies: a login form holds one token; an action's form at most a
// dead-letter page's selection of ids.
const (
	maxLoginBody = 16 << 10
	maxForm      = 1 << 20
)

// guard refuses what no page of the console sends, before any handler
// reads a byte of the body: a Host the console does not serve (421), a
// cross-origin POST (403), a body that is not a form (415) or too large
// (413). It parses the form of the requests it lets through.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) bool {
	if !s.hostOK(r) {
		refuse(w, r, "misdirected request: this console does not serve the host "+quoteHost(r.Host)+
			" (add it to WEBHOOK_CONSOLE_HOSTS)", http.StatusMisdirectedRequest)
		return false
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		r.Body = http.MaxBytesReader(w, r.Body, 0) // never read
		return true
	}
	if why := s.crossOrigin(r); why != "" {
		refuse(w, r, "forbidden: cross-origin request ("+why+")", http.StatusForbidden)
		return false
	}
	limit := int64(maxForm)
	if r.URL.Path == "/login" {
		limit = maxLoginBody
	}
	if r.ContentLength != 0 {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
			refuse(w, r, "unsupported media type: send application/x-www-form-urlencoded", http.StatusUnsupportedMediaType)
			return false
		}
	}
	if r.ContentLength > limit {
		refuse(w, r, "request body too large", http.StatusRequestEntityTooLarge)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			refuse(w, r, "request body too large", http.StatusRequestEntityTooLarge)
		} else {
			refuse(w, r, "bad form", http.StatusBadRequest)
		}
		return false
	}
	return true
}

// refuse answers a request guard refuses: JSON under /api/, as the API's
// other errors.
func refuse(w http.ResponseWriter, r *http.Request, msg string, code int) {
	if isAPI(r) {
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	http.Error(w, msg, code)
}

// quoteHost is a Host header fit for an error message (short, printable).
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, `"`+h+`"`)
}

// hostOK says whether r names a host the console serves: the address the
// connection came to (an IP literal cannot be rebound by DNS), localhost
// when that address is loopback, or one of Config.Hosts. Anything else may
// be a page of another site whose name was made to resolve to this
// console (DNS rebinding).
func (s *Server) hostOK(r *http.Request) bool {
	host, port := splitHost(r.Host)
	if host == "" {
		return false
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(local.String()); err == nil {
			la := ap.Addr().Unmap().WithZone("")
			if a, err := netip.ParseAddr(host); err == nil && a.Unmap().WithZone("") == la {
				return true
			}
			if host == "localhost" && la.IsLoopback() {
				return true
			}
		}
	}
	for _, h := range s.cfg.Hosts {
		hh, hp := splitHost(h)
		if hh == host && (hp == "" || hp == port) {
			return true
		}
	}
	return false
}

// splitHost splits a Host header (or a Hosts entry) into its lowercase
// name, without brackets or a final dot, and its port ("" when none).
func splitHost(h string) (host, port string) {
	h = strings.ToLower(strings.TrimSpace(h))
	if hh, p, err := net.SplitHostPort(h); err == nil {
		h, port = hh, p
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(h, "."), port
}

// crossOrigin says why a POST comes from another site ("" when it does
// not): a browser says where a request comes from in Sec-Fetch-Site and
// Origin; a script (curl) sends neither and is let through. The console's
// no-referrer policy makes a browser send "Origin: null" with its own
// forms, so a null origin passes only beside Sec-Fetch-Site: same-origin.
func (s *Server) crossOrigin(r *http.Request) string {
	site := r.Header.Get("Sec-Fetch-Site")
	switch site {
	case "", "same-origin", "none":
	default:
		return "Sec-Fetch-Site: " + quoteHost(site)
	}
	origin, ok := r.Header["Origin"]
	if !ok {
		return ""
	}
	if len(origin) != 1 {
		return "several Origin headers"
	}
	if origin[0] == "null" {
		if site == "same-origin" {
			return ""
		}
		return "Origin: null"
	}
	scheme := "http"
	if r.TLS != nil || s.cfg.SecureCookies {
		scheme = "https"
	}
	if want := scheme + "://" + strings.ToLower(r.Host); strings.ToLower(origin[0]) != want {
		why := "Origin " + quoteHost(origin[0]) + " is not " + quoteHost(want)
		if scheme == "http" && strings.HasPrefix(strings.ToLower(origin[0]), "https://") {
			why += "; behind a TLS proxy, set WEBHOOK_CONSOLE_SECURE_COOKIE=true"
		}
		return why
	}
	return ""
}

// staticFiles serves the files of static/ and nothing else: no directory
// listing, and no path with a dot segment, however it is spelled (the
// file server would clean "%2e%2e" into the parent and list it).
func staticFiles() http.Handler {
	files := mustSub(assets, "static")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/static/")
		raw := strings.ToLower(r.URL.EscapedPath())
		if !ok || strings.Contains(raw, "%2e") || strings.Contains(raw, "%2f") || strings.Contains(raw, "%5c") ||
			!fs.ValidPath(name) || strings.HasPrefix(name, ".") || strings.Contains(name, "/.") || strings.Contains(name, `\`) {
			http.NotFound(w, r)
			return
		}
		if st, err := fs.Stat(files, name); err != nil || !st.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		http.ServeFileFS(w, r, files, name)
	})
}
