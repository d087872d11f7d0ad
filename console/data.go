package console

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fluxora/webhook-worker/eventheaders"
	"github.com/fluxora/webhook-worker/outbox"
)

// Endpoint is one endpoint as the overview and GET /api/endpoints show
// it: its status (state, backlog, dead letters, last error) and its
// attempts of the last Window.
type Endpoint struct {
	outbox.EndpointStatus
	// Backlog is every pending delivery: due, scheduled and in flight.
	Backlog          int64    `json:"backlog"`
	AttemptsLastHour int64    `json:"attempts_last_hour"`
	SuccessRate      *float64 `json:"success_rate"` // 0..1; nil: no attempt
	P50MS            *float64 `json:"p50_ms"`
	P99MS            *float64 `json:"p99_ms"`
	// Breaker is its circuit breaker; nil when not read (no REDIS_URL,
	// or Redis did not answer).
	Breaker *Breaker `json:"breaker,omitempty"`
	// Flow is its flow control and its consumer's pause; nil: none.
	Flow *Flow `json:"flow,omitempty"`
	// Filter is its payload filter, a jsonpath as stored; "": none.
	Filter string `json:"filter,omitempty"`
}

// Flow is an endpoint's flow control as the console shows it.
type Flow struct {
	// Rate is "N/s" or "N/m", "+B" with a burst; "": no rate.
	Rate        string `json:"rate,omitempty"`
	MaxInFlight int    `json:"max_in_flight,omitempty"`
	// PausedUntil is when the pause its consumer asked for ends.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
}

// flowOf is f as the console shows it; nil when it limits nothing and
// no pause holds.
func flowOf(f outbox.EndpointFlow) *Flow {
	if !f.Limited() && f.PausedUntil.IsZero() {
		return nil
	}
	out := &Flow{MaxInFlight: f.MaxInFlight, Rate: f.RateShown()}
	if !f.PausedUntil.IsZero() {
		out.PausedUntil = &f.PausedUntil
	}
	return out
}

// Breakers reads circuit breaker states (the gates' shared state in
// Redis).
type Breakers interface {
	// Breakers returns the breakers of the consumer URLs, by URL, in one
	// round trip.
	Breakers(ctx context.Context, urls []string) (map[string]Breaker, error)
}

// Breaker is one consumer's circuit breaker.
type Breaker struct {
	State string `json:"state"` // closed, open or half-open
	// OpenUntil is when an open breaker lets a probe through.
	OpenUntil *time.Time `json:"open_until,omitempty"`
}

// Overview is the queue at a glance and every endpoint.
type Overview struct {
	Queue     outbox.QueueStatus `json:"queue"`
	Endpoints []Endpoint         `json:"endpoints"`
}

// endpoints reads the endpoints (only: the one of that name; "": all)
// with their figures of the last Window.
func (s *Server) endpoints(ctx context.Context, only string) ([]Endpoint, error) {
	st, err := s.cfg.Store.EndpointStatus(ctx, s.cfg.DefaultEndpoint, only)
	if err != nil {
		return nil, err
	}
	hours, err := s.cfg.Store.EndpointHours(ctx, s.cfg.Now().Add(-s.cfg.Window))
	if err != nil {
		return nil, err
	}
	flows, err := s.cfg.Store.EndpointFlows(ctx)
	if err != nil {
		return nil, err
	}
	flows[outbox.DefaultEndpointName] = flows[""]
	filters, err := s.cfg.Store.EndpointFilters(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, len(st))
	for i, e := range st {
		h := hours[e.Name]
		out[i] = Endpoint{EndpointStatus: e, Backlog: e.Pending + e.Scheduled + e.InFlight,
			AttemptsLastHour: h.Attempts, P50MS: h.P50MS, P99MS: h.P99MS, Flow: flowOf(flows[e.Name]),
			Filter: filters[e.Name]}
		if h.Attempts > 0 {
			rate := float64(h.Succeeded) / float64(h.Attempts)
			out[i].SuccessRate = &rate
		}
	}
	s.breakers(ctx, out)
	return out, nil
}

// breakers fills in the endpoints' breakers; a failed read leaves them
// out (logged: the page still answers).
func (s *Server) breakers(ctx context.Context, eps []Endpoint) {
	if s.cfg.Breakers == nil || len(eps) == 0 {
		return
	}
	urls := make([]string, 0, len(eps))
	for _, e := range eps {
		if u := s.consumerURL(e); u != "" {
			urls = append(urls, u)
		}
	}
	got, err := s.cfg.Breakers.Breakers(ctx, urls)
	if err != nil {
		s.cfg.Logger.Warn("console: breakers not read", "error", err)
		return
	}
	for i := range eps {
		if b, ok := got[s.consumerURL(eps[i])]; ok {
			eps[i].Breaker = &b
		}
	}
}

// consumerURL is the URL whose breaker is e's: WEBHOOK_URL for the
// default endpoint.
func (s *Server) consumerURL(e Endpoint) string {
	if e.URL == "" && e.Name == outbox.DefaultEndpointName {
		return s.cfg.DefaultURL
	}
	return e.URL
}

func (s *Server) overview(ctx context.Context) (Overview, error) {
	q, err := s.cfg.Store.QueueStatus(ctx)
	if err != nil {
		return Overview{}, err
	}
	eps, err := s.endpoints(ctx, "")
	return Overview{Queue: q, Endpoints: eps}, err
}

// EndpointDetail is an endpoint's page: its figures, its attempts of the
// last Window (newest first, at most AttemptsLimitDefault) and its
// newest dead letters.
type EndpointDetail struct {
	Endpoint
	Attempts    []outbox.DeliveryAttempt `json:"attempts"`
	DeadLetters []outbox.DeadLetter      `json:"dead_letters"`
}

func (s *Server) endpointDetail(ctx context.Context, name string) (EndpointDetail, error) {
	eps, err := s.endpoints(ctx, name)
	if err != nil {
		return EndpointDetail{}, err
	}
	if len(eps) == 0 {
		return EndpointDetail{}, outbox.ErrEndpointNotFound
	}
	d := EndpointDetail{Endpoint: eps[0]}
	if d.Attempts, err = s.cfg.Store.EndpointAttempts(ctx, name, s.cfg.Now().Add(-s.cfg.Window), AttemptsLimitDefault); err != nil {
		return EndpointDetail{}, err
	}
	d.DeadLetters, err = s.cfg.Store.DeadLetters(ctx, outbox.DeadLetterQuery{Limit: 20, Endpoint: name})
	return d, err
}

// Delivery is what a search by delivery or event id finds: the row's event
// and payload preview, the request of each delivery's last attempt (its
// headers as the sender builds them, secret ones masked), and every
// attempt.
type Delivery struct {
	ID       string                   `json:"id"`
	Found    bool                     `json:"found"`
	Row      *outbox.DeliveryRow      `json:"row"`
	Requests []SentRequest            `json:"requests"`
	Attempts []outbox.DeliveryAttempt `json:"attempts"`
}

// SentRequest is the request of a delivery's last attempt: its headers,
// sorted by name, as the sender builds them (Config.RequestHeaders), the
// secret ones' values masked.
type SentRequest struct {
	DeliveryID string      `json:"delivery_id"`
	Endpoint   string      `json:"endpoint"`
	Attempt    int         `json:"attempt"`
	Headers    [][2]string `json:"headers"`
}

// Request is what the headers of a delivery's request are made of: the
// delivery, one of its attempts and what its row carries.
type Request struct {
	DeliveryID, EventType string
	// Endpoint is the attempt's endpoint name (the WEBHOOK_URL one's is
	// outbox.DefaultEndpointName).
	Endpoint string
	// Attempt is the attempt's number, 1 for the first.
	Attempt int
	// Started is when the attempt started: its timestamp headers carry
	// this second.
	Started time.Time
	// Headers are the event's own headers, by name.
	Headers []eventheaders.Field
	// OrderingKey and Sequence are the delivery's place in its lane (""
	// and 0 without a key).
	OrderingKey string
	Sequence    int64
}

// delivery searches id; the row is looked up in the history processed
// between an hour before the first attempt and an hour after the last
// (the last Window when there is none).
func (s *Server) delivery(ctx context.Context, id string) (Delivery, error) {
	d := Delivery{ID: id, Requests: []SentRequest{}}
	var err error
	if d.Attempts, err = s.cfg.Store.SearchAttempts(ctx, id); err != nil {
		return d, err
	}
	from, to := s.cfg.Now().Add(-s.cfg.Window), s.cfg.Now()
	if n := len(d.Attempts); n > 0 {
		from, to = d.Attempts[0].StartedAt, d.Attempts[0].StartedAt
		for _, a := range d.Attempts {
			from, to = minTime(from, a.StartedAt), maxTime(to, a.StartedAt)
		}
		from, to = from.Add(-time.Hour), to.Add(time.Hour)
	}
	row, ok, err := s.cfg.Store.DeliveryRow(ctx, id, from, to, PreviewDefault)
	if err != nil {
		return d, err
	}
	if ok {
		if d.Requests, err = s.requests(ctx, id, row, d.Attempts, from, to); err != nil {
			return d, err
		}
		row.Headers = maskHeaders(row.Headers)
		d.Row = &row
	}
	d.Found = ok || len(d.Attempts) > 0
	return d, nil
}

// requests are the requests of the last attempt of each delivery in
// attempts (ordered by delivery, oldest first), the row found for id
// giving the event: the delivery's own or, for a search by event id, its
// event's. A delivery of a keyed event has a sequence of its own, read
// from its own row (0 when that is gone). None without
// Config.RequestHeaders.
func (s *Server) requests(ctx context.Context, id string, row outbox.DeliveryRow, attempts []outbox.DeliveryAttempt, from, to time.Time) ([]SentRequest, error) {
	out := []SentRequest{}
	if s.cfg.RequestHeaders == nil {
		return out, nil
	}
	fields := make([]eventheaders.Field, 0, len(row.Headers))
	for _, k := range slices.Sorted(maps.Keys(row.Headers)) {
		fields = append(fields, eventheaders.Field{Name: k, Value: row.Headers[k]})
	}
	for i, a := range attempts {
		if i+1 < len(attempts) && attempts[i+1].DeliveryID == a.DeliveryID {
			continue // not its last
		}
		r := Request{DeliveryID: a.DeliveryID, EventType: row.EventType, Endpoint: a.Endpoint, Attempt: a.Attempt.Attempt,
			Started: a.StartedAt, Headers: fields, OrderingKey: row.OrderingKey, Sequence: row.Sequence}
		if r.OrderingKey != "" && !strings.EqualFold(a.DeliveryID, id) {
			own, ok, err := s.cfg.Store.DeliveryRow(ctx, a.DeliveryID, from, to, 0)
			if err != nil {
				return nil, err
			}
			r.Sequence = 0
			if ok {
				r.Sequence = own.Sequence
			}
		}
		out = append(out, SentRequest{DeliveryID: a.DeliveryID, Endpoint: a.Endpoint, Attempt: a.Attempt.Attempt,
			Headers: headerList(s.cfg.RequestHeaders(r))})
	}
	return out, nil
}

// headerList is h as name and value pairs sorted by name
// (case-insensitively), a name given twice once per value, the secret
// ones' values masked.
func headerList(h http.Header) [][2]string {
	names := slices.SortedFunc(maps.Keys(h), func(a, b string) int {
		return strings.Compare(strings.ToLower(a), strings.ToLower(b))
	})
	out := make([][2]string, 0, len(h))
	for _, k := range names {
		for _, v := range h[k] {
			out = append(out, [2]string{k, maskHeader(k, v)})
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// masked stands for a secret header's value.
const masked = "••••••••"

// secretHeader says whether a header's value is a credential, shown masked
// wherever the console shows headers: signatures, Authorization,
// Proxy-Authorization, cookies, and every name holding token, secret,
// password or key (API keys, X-Auth-Token, ...), but for the worker's own
// ordering key headers (an event cannot set a webhook-* or x-fluxora-*
// header).
func secretHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization":
		return true
	case "webhook-ordering-key", "x-fluxora-ordering-key":
		return false
	}
	for _, part := range []string{"signature", "cookie", "token", "secret", "password", "key"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// maskHeader is value, or masked when name is a secret header.
func maskHeader(name, value string) string {
	if secretHeader(name) {
		return masked
	}
	return value
}

// maskHeaders is headers with the secret ones' values masked (a copy).
func maskHeaders(headers map[string]string) map[string]string {
	if headers == nil {
		return nil
	}
	out := make(map[string]string, len(headers))
	for k, v := range headers {
		out[k] = maskHeader(k, v)
	}
	return out
}

// deadLetterFilter is the filter of the dead-letter page and API, from
// r's query or form: endpoint, event_type, since, until, limit.
type deadLetterFilter struct {
	Endpoint, EventType string
	Since, Until        *time.Time
	Limit               int
}

func readDeadLetterFilter(v url.Values) (deadLetterFilter, error) {
	f := deadLetterFilter{Endpoint: v.Get("endpoint"), EventType: v.Get("event_type")}
	var err error
	if f.Since, err = parseTime("since", v.Get("since")); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", v.Get("until")); err != nil {
		return f, err
	}
	f.Limit, err = intParam("limit", v.Get("limit"), DeadLettersLimitDefault, 1, 10_000)
	return f, err
}

func (f deadLetterFilter) query() outbox.DeadLetterQuery {
	return outbox.DeadLetterQuery{Limit: f.Limit, EventType: f.EventType, Endpoint: f.Endpoint, Since: f.Since, Until: f.Until}
}

// values is the filter as query parameters (the page's links and forms).
func (f deadLetterFilter) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("endpoint", f.Endpoint)
	set("event_type", f.EventType)
	if f.Since != nil {
		v.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if f.Until != nil {
		v.Set("until", f.Until.UTC().Format(time.RFC3339))
	}
	return v
}

// requestID is the delivery id a search asks for, checked to be a uuid.
func requestID(v string) (string, error) {
	if !isUUID(v) {
		return "", badRequest("id: %q is not a delivery or event id (a uuid)", v)
	}
	return v, nil
}

// isUUID says whether v is a uuid in its 36-character spelling.
func isUUID(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i, c := range v {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
			return false
		}
	}
	return true
}
