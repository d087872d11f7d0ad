package console

import (
	"context"
	"net/http"
	"strings"
)

// The reads: each handler serves a page and its JSON twin under /api/.

// serve answers with what load reads: JSON under /api/ (code 404 when
// notFound says so), else the page name.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, name string, load func(ctx context.Context) (any, error)) {
	v, err := load(r.Context())
	switch {
	case err != nil:
		s.fail(w, r, err)
	case isAPI(r):
		code := http.StatusOK
		if d, ok := v.(Delivery); ok && !d.Found {
			code = http.StatusNotFound
		}
		writeJSON(w, code, v)
	default:
		s.render(w, r, http.StatusOK, name, v)
	}
}

// overview is / and GET /api/overview: the queue and every endpoint; the
// page adds the charts of every endpoint (?range=).
func (s *Server) overviewHandler(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, "overview", func(ctx context.Context) (any, error) {
		o, err := s.overview(ctx)
		if err != nil || isAPI(r) {
			return o, err
		}
		c, err := s.pageCharts(ctx, r, "")
		return overviewPage{Overview: o, Charts: c}, err
	})
}

// overviewPage is the overview's page: the overview and its charts (nil
// for a refresh of the figures).
type overviewPage struct {
	Overview
	Charts *Charts
}

// endpointPage is an endpoint's page: its detail and its charts (nil for a
// refresh of the figures).
type endpointPage struct {
	EndpointDetail
	Charts *Charts
}

// apiEndpoints is GET /api/endpoints: an array of every endpoint ([]
// when none).
func (s *Server) apiEndpoints(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, "", func(ctx context.Context) (any, error) { return s.endpoints(ctx, "") })
}

// endpointHandler is /endpoints/{name} and GET /api/endpoints/{name}; the
// page adds the endpoint's charts (?range=).
func (s *Server) endpointHandler(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, "endpoint", func(ctx context.Context) (any, error) {
		d, err := s.endpointDetail(ctx, r.PathValue("name"))
		if err != nil || isAPI(r) {
			return d, err
		}
		c, err := s.pageCharts(ctx, r, d.Name)
		return endpointPage{EndpointDetail: d, Charts: c}, err
	})
}

// deliveryHandler is /deliveries?id= (the search form when no id) and GET
// /api/deliveries/{id} (404 when nothing of it is left).
func (s *Server) deliveryHandler(w http.ResponseWriter, r *http.Request) {
	q := r.PathValue("id")
	if !isAPI(r) {
		q = strings.TrimSpace(r.URL.Query().Get("id"))
		if q == "" {
			s.render(w, r, http.StatusOK, "delivery", nil)
			return
		}
	}
	s.serve(w, r, "delivery", func(ctx context.Context) (any, error) {
		id, err := requestID(q)
		if err != nil {
			return nil, err
		}
		return s.delivery(ctx, id)
	})
}

// deadLetters is the dead-letter page's data: the filter and what matches.
type deadLetters struct {
	Filter deadLetterFilter
	Query  string // the filter as a query string
	List   any
}

// deadLettersHandler is /dead-letters and GET
// /api/dead-letters?endpoint=&event_type=&since=&until=&limit= (an array,
// newest first).
func (s *Server) deadLettersHandler(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, "deadletters", func(ctx context.Context) (any, error) {
		f, err := readDeadLetterFilter(r.URL.Query())
		if err != nil {
			return nil, err
		}
		list, err := s.cfg.Store.DeadLetters(ctx, f.query())
		if err != nil || isAPI(r) {
			return list, err
		}
		return deadLetters{Filter: f, Query: f.values().Encode(), List: list}, nil
	})
}
