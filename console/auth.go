package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// cookieName is the session cookie's name.
const cookieName = "console_session"

// session is one login: its CSRF token, its end, and the message of the
// last action, shown once by the next page.
type session struct {
	csrf    string
	expires time.Time
	flash   string
}

// sessions are the logins, in memory: a restart of the console logs
// everyone out.
type sessions struct {
	mu   sync.Mutex
	m    map[string]*session
	now  func() time.Time
	life time.Duration
}

func newSessions(now func() time.Time, life time.Duration) *sessions {
	return &sessions{m: map[string]*session{}, now: now, life: life}
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session and returns its id; expired ones are dropped.
func (s *sessions) create() (string, *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, ss := range s.m {
		if now.After(ss.expires) {
			delete(s.m, id)
		}
	}
	id, ss := randomToken(), &session{csrf: randomToken(), expires: now.Add(s.life)}
	s.m[id] = ss
	return id, ss
}

// get returns the live session of id, or nil.
func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	if ss == nil || s.now().After(ss.expires) {
		delete(s.m, id)
		return nil
	}
	return ss
}

// setFlash and takeFlash keep the message of an action for the next page.
func (s *sessions) setFlash(ss *session, msg string) {
	s.mu.Lock()
	ss.flash = msg
	s.mu.Unlock()
}

func (s *sessions) takeFlash(ss *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := ss.flash
	ss.flash = ""
	return msg
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// equal compares two secrets in constant time (their hashes: the length
// of the token is not revealed either).
func equal(a, b []byte) bool {
	ha, hb := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// sessionKey is the context key of the request's session (nil: bearer).
type sessionKey struct{}

func sessionOf(r *http.Request) *session {
	ss, _ := r.Context().Value(sessionKey{}).(*session)
	return ss
}

// isAPI says whether r is a call of the JSON API.
func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// clientIP is the address the login limit counts by: an IPv4 address, or
// an IPv6 client's /64 (one host is commonly given a whole /64).
func clientIP(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	a := ap.Addr().Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64) // never fails for an IPv6 address
		return p.String()
	}
	return a.String()
}

// authed lets through a request with the bearer token, or with a live
// session cookie (and, for a POST, the session's CSRF token: 403
// without). Otherwise: 401 for the API and a bearer header (429 over the
// login limit), a redirect to /login for a page. The right bearer token
// is never refused; wrong ones count against the login limit.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if auth := r.Header.Get("Authorization"); auth != "" {
			tok, ok := strings.CutPrefix(auth, "Bearer ")
			if ok && equal([]byte(tok), s.cfg.Token) {
				h(w, r)
				return
			}
			if !s.limiter.wrong(clientIP(r)) {
				http.Error(w, "too many wrong tokens: wait a minute", http.StatusTooManyRequests)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="console"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var ss *session
		if c, err := r.Cookie(cookieName); err == nil {
			ss = s.sessions.get(c.Value)
		}
		switch {
		case ss == nil && (isAPI(r) || r.Method == http.MethodPost):
			w.Header().Set("WWW-Authenticate", `Bearer realm="console"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case ss == nil:
			http.Redirect(w, r, "/login", http.StatusSeeOther)
		case r.Method == http.MethodPost && !s.csrfOK(r, ss):
			http.Error(w, "forbidden: missing or wrong CSRF token", http.StatusForbidden)
		default:
			h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss)))
		}
	}
}

// csrfOK checks the CSRF token of a POST: the form field csrf or the
// X-CSRF-Token header.
func (s *Server) csrfOK(r *http.Request, ss *session) bool {
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		tok = r.PostFormValue("csrf")
	}
	return tok != "" && equal([]byte(tok), []byte(ss.csrf))
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", nil)
}

// login checks the token of the login form and starts a session. The
// right token always gets in; a wrong one counts against the login limit
// of its address (429 over it).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !equal([]byte(strings.TrimSpace(r.PostFormValue("token"))), s.cfg.Token) {
		if !s.limiter.wrong(clientIP(r)) {
			s.render(w, r, http.StatusTooManyRequests, "login", "Wrong token, and too many of them: wait a minute.")
			return
		}
		s.render(w, r, http.StatusUnauthorized, "login", "Wrong token.")
		return
	}
	id, _ := s.sessions.create()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.cfg.SecureCookies || r.TLS != nil, MaxAge: int(s.cfg.SessionTTL / time.Second)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		s.sessions.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
