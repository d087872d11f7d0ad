package console

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
)

// The actions: every one a POST of form values (a page's form, or a
// script's application/x-www-form-urlencoded body); under /api/ the answer
// is JSON, else the page goes back to where it was with a message.

// GraceDefault is how long a secret rotated from the console keeps the
// old secret signing beside the new one (24 hours, as the CLI's).
const GraceDefault = 24 * time.Hour

// done answers a finished action: v as JSON under /api/, else msg shown
// once on back.
func (s *Server) done(w http.ResponseWriter, r *http.Request, back, msg string, v any) {
	if isAPI(r) {
		writeJSON(w, http.StatusOK, v)
		return
	}
	if ss := sessionOf(r); ss != nil {
		s.sessions.setFlash(ss, msg)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// endpointURL is the page of the endpoint name.
func endpointURL(name string) string { return "/endpoints/" + url.PathEscape(name) }

// disable: POST /endpoints/{name}/disable (reason: optional).
func (s *Server) disable(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	reason := cmp.Or(strings.TrimSpace(r.FormValue("reason")), "disabled by operator (console)")
	moved, err := s.cfg.Endpoints.Disable(r.Context(), name, reason)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.done(w, r, endpointURL(name), fmt.Sprintf("Disabled %s; %d pending deliveries dead-lettered.", name, moved),
		map[string]any{"disabled": name, "dead_lettered": moved})
}

// enable: POST /endpoints/{name}/enable.
func (s *Server) enable(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.cfg.Endpoints.Enable(r.Context(), name); err != nil {
		s.fail(w, r, err)
		return
	}
	s.done(w, r, endpointURL(name), "Enabled "+name+".", map[string]any{"enabled": name})
}

// rotate: POST /endpoints/{name}/rotate-secret (grace_hours: 0 to 720,
// default 24). The new secret is in this answer only.
func (s *Server) rotate(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	hours, err := intParam("grace_hours", r.FormValue("grace_hours"), int(GraceDefault/time.Hour), 0, 720)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	grace := time.Duration(hours) * time.Hour
	secret, err := s.cfg.Endpoints.RotateSecret(r.Context(), name, grace)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := map[string]any{"endpoint": name, "secret": secret, "previous_signs_for_hours": hours}
	if isAPI(r) {
		writeJSON(w, http.StatusOK, v)
		return
	}
	s.render(w, r, http.StatusOK, "secret", v)
}

// replayEndpoint: POST /endpoints/{name}/replay (since, until, event_type:
// optional; none replays all of the endpoint's dead letters).
func (s *Server) replayEndpoint(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f, err := readDeadLetterFilter(r.Form)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.replay(w, r, endpointURL(name), outbox.ReplayFilter{EventType: f.EventType, Since: f.Since, Until: f.Until, Endpoint: name})
}

// replayDeadLetters: POST /dead-letters/replay with id=… (repeated: those
// selected) or all=1 and the filter (endpoint, event_type, since, until:
// every matching one).
func (s *Server) replayDeadLetters(w http.ResponseWriter, r *http.Request) {
	f, err := readDeadLetterFilter(r.Form)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	back := "/dead-letters?" + f.values().Encode()
	ids := r.Form["id"]
	for _, id := range ids {
		if !isUUID(id) {
			s.fail(w, r, badRequest("id: %q is not a delivery id", id))
			return
		}
	}
	switch {
	case len(ids) > 0:
		s.replay(w, r, back, outbox.ReplayFilter{IDs: ids})
	case r.FormValue("all") == "1":
		s.replay(w, r, back, outbox.ReplayFilter{EventType: f.EventType, Since: f.Since, Until: f.Until, Endpoint: f.Endpoint})
	default:
		s.fail(w, r, badRequest("select dead letters (id) or replay all matching (all=1)"))
	}
}

// replay runs f and says what it did: how many went back, how many were
// left (their endpoint disabled or removed), the ids not found.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, back string, f outbox.ReplayFilter) {
	res, err := s.cfg.Store.Replay(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	msg := fmt.Sprintf("Replayed %d dead letters.", res.Count)
	var left int64
	for _, b := range res.Blocked {
		left += b.Count
	}
	if left > 0 {
		msg += fmt.Sprintf(" %d left: their endpoint is disabled or removed.", left)
	}
	if len(res.Missing) > 0 {
		msg += fmt.Sprintf(" Not dead letters (nothing replayed): %s.", strings.Join(res.Missing, ", "))
	}
	s.done(w, r, back, msg, map[string]any{"replayed": res.Count, "blocked": res.Blocked, "missing": res.Missing})
}

// purge: POST /dead-letters/purge (before: required; endpoint: optional;
// confirm: the word "purge", typed). It deletes the dead letters that died
// before before.
func (s *Server) purge(w http.ResponseWriter, r *http.Request) {
	before, err := parseTime("before", r.FormValue("before"))
	if err == nil && before == nil {
		err = badRequest("before: required")
	}
	if err == nil && strings.TrimSpace(r.FormValue("confirm")) != "purge" {
		err = badRequest(`confirm: type the word purge to delete dead letters`)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := s.cfg.Store.PurgeDeadLetters(r.Context(), *before, r.FormValue("endpoint"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.done(w, r, "/dead-letters", fmt.Sprintf("Deleted %d dead letters.", n), map[string]any{"deleted": n})
}
