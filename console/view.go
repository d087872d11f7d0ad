package console

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
)

//go:embed assets
var embedded embed.FS

// assets is what the console serves and renders: static/ (CSS, JS) and
// templates/.
var assets = mustSub(embedded, "assets")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the embedded directory is there at build time
	}
	return sub
}

// pageNames are the templates besides the layout, one per page.
var pageNames = []string{"login", "overview", "endpoint", "delivery", "deadletters", "secret"}

// pages are the parsed templates, by page name.
type pages struct{ t map[string]*template.Template }

func parsePages() (*pages, error) {
	funcs := template.FuncMap{"time": fmtTime, "ms": fmtMS, "pct": fmtPct, "status": fmtStatus, "str": fmtStr, "endpointRows": endpointRows, "chartsSVG": chartsSVG,
		"breaker": func(b *Breaker) template.HTML { return template.HTML(breakerText(b)) }, // breakerText escapes
		"flow":    func(f *Flow) template.HTML { return template.HTML(flowText(f)) }}       // flowText escapes
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/charts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		p.t[name] = t
	}
	return p, nil
}

// view is what every page's template gets.
type view struct {
	Title string
	CSRF  string // "" for a bearer request (no form needs it) or the login page
	Flash string
	Data  any
}

// render writes page name with data; the session's flash message, if any,
// is shown once.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, data any) {
	v := view{Title: name, Data: data}
	if ss := sessionOf(r); ss != nil {
		v.CSRF, v.Flash = ss.csrf, s.sessions.takeFlash(ss)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := s.pages.t[name].Execute(w, v); err != nil {
		s.cfg.Logger.Error("console: render", "page", name, "err", err)
	}
}

// writeJSON writes v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers an error: 404 for an unknown endpoint, 400 for a refused
// value, else 500 (logged; the client sees no detail).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := http.StatusInternalServerError, "internal error (see the console's log)"
	switch {
	case errors.Is(err, outbox.ErrEndpointNotFound):
		code, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, ErrInvalid):
		code, msg = http.StatusBadRequest, err.Error()
	default:
		s.cfg.Logger.Error("console: request failed", "path", r.URL.Path, "err", err)
	}
	if isAPI(r) {
		writeJSON(w, code, map[string]string{"error": msg})
		return
	}
	http.Error(w, msg, code)
}

// badRequest answers a bad parameter with 400 and why.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// parseTime reads a time parameter: RFC 3339, a browser's datetime-local
// (2026-12-01T09:30, UTC) or a date (UTC midnight); "" is none.
func parseTime(name, v string) (*time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return &t, nil
		}
	}
	return nil, badRequest("%s: use RFC 3339 (2026-12-01T09:30:00Z), 2026-12-01T09:30 (UTC) or a date", name)
}

// intParam reads a whole number from lo to hi; "" is def.
func intParam(name, v string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s: must be a whole number from %d to %d", name, lo, hi)
	}
	return n, nil
}

func fmtTime(t any) string {
	switch v := t.(type) {
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05Z")
	case *time.Time:
		if v != nil {
			return fmtTime(*v)
		}
	}
	return "-"
}

func fmtMS(v any) string {
	switch f := v.(type) {
	case float64:
		return strconv.FormatFloat(f, 'f', 1, 64) + " ms"
	case *float64:
		if f != nil {
			return fmtMS(*f)
		}
	}
	return "-"
}

func fmtPct(f *float64) string {
	if f == nil {
		return "-"
	}
	return strconv.FormatFloat(*f*100, 'f', 1, 64) + "%"
}

func fmtStatus(s *int) string {
	if s == nil {
		return "-"
	}
	return strconv.Itoa(*s)
}

func fmtStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
