package console

import (
	"context"
	"net/http"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
)

// ChartRange is a span the charts show, chosen with ?range=: its buckets'
// width and number (the last bucket holds now).
type ChartRange struct {
	Name   string // the value of ?range=
	Label  string // "last hour"
	Bucket time.Duration
	Count  int // buckets
}

// ChartRanges are the spans the console offers, the first the default:
// an hour by the minute, a day by 15 minutes, a week by 2 hours (a width a
// bar stays readable at, under a hundred bars a chart).
var ChartRanges = []ChartRange{
	{Name: "hour", Label: "last hour", Bucket: time.Minute, Count: 60},
	{Name: "day", Label: "last day", Bucket: 15 * time.Minute, Count: 96},
	{Name: "week", Label: "last week", Bucket: 2 * time.Hour, Count: 84},
}

// chartRange reads ?range= ("" is the first of ChartRanges).
func chartRange(v string) (ChartRange, error) {
	if v == "" {
		return ChartRanges[0], nil
	}
	for _, r := range ChartRanges {
		if r.Name == v {
			return r, nil
		}
	}
	return ChartRange{}, badRequest("range: use hour, day or week")
}

// Charts is what the charts of the overview (every endpoint) or of an
// endpoint page show, and GET /api/charts answers: the buckets of the
// range, oldest first, the last one holding now.
type Charts struct {
	// Endpoint is the endpoint's name; "" for every endpoint.
	Endpoint string `json:"endpoint"`
	Range    string `json:"range"`
	// From is where the first bucket starts; To is now (the last bucket
	// ends after it).
	From          time.Time            `json:"from"`
	To            time.Time            `json:"to"`
	BucketSeconds int64                `json:"bucket_seconds"`
	Buckets       []outbox.ChartBucket `json:"buckets"`
	// Ranges are the ranges offered, for the page's links.
	Ranges []ChartRange `json:"-"`
}

// charts reads the charts of endpoint ("" every one) over rg, its buckets
// aligned on the Unix epoch (whole UTC minutes, quarters, even hours).
func (s *Server) charts(ctx context.Context, endpoint string, rg ChartRange) (*Charts, error) {
	now := s.cfg.Now().UTC()
	from := now.Truncate(rg.Bucket).Add(-time.Duration(rg.Count-1) * rg.Bucket)
	list, err := s.cfg.Store.Chart(ctx, outbox.ChartQuery{Endpoint: endpoint, From: from, Bucket: rg.Bucket, Buckets: rg.Count})
	if err != nil {
		return nil, err
	}
	return &Charts{Endpoint: endpoint, Range: rg.Name, From: from, To: now, BucketSeconds: int64(rg.Bucket / time.Second),
		Buckets: list, Ranges: ChartRanges}, nil
}

// pageCharts reads the charts a page shows below its figures; none (nil)
// for the script's refresh of the figures (X-Console-Refresh), which keeps
// only them: the charts are read once, when the page is loaded.
func (s *Server) pageCharts(ctx context.Context, r *http.Request, endpoint string) (*Charts, error) {
	if r.Header.Get("X-Console-Refresh") != "" {
		return nil, nil
	}
	rg, err := chartRange(r.URL.Query().Get("range"))
	if err != nil {
		return nil, err
	}
	return s.charts(ctx, endpoint, rg)
}

// chartsHandler is GET /api/charts?range=hour|day|week&endpoint=NAME
// (every endpoint without one).
func (s *Server) chartsHandler(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, "", func(ctx context.Context) (any, error) {
		rg, err := chartRange(r.URL.Query().Get("range"))
		if err != nil {
			return nil, err
		}
		return s.charts(ctx, r.URL.Query().Get("endpoint"), rg)
	})
}
