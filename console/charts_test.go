package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// chartsAnswer is what GET /api/charts answers.
type chartsAnswer struct {
	Endpoint      string
	Range         string
	From, To      time.Time
	BucketSeconds int64 `json:"bucket_seconds"`
	Buckets       []struct {
		Start        time.Time
		Succeeded    int64
		Failed       int64
		DeadLettered int64    `json:"dead_lettered"`
		P50MS        *float64 `json:"p50_ms"`
		Backlog      *int64
	}
}

// GET /api/charts answers the buckets of a range, of every endpoint or of
// one: shop's two attempts of the last minute (one failed), its dead
// letter of 30 minutes ago in the hour and the one of 2 hours ago in the
// day; a range or an endpoint it does not know is a 400 or a 404.
func TestChartsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	for _, tc := range []struct {
		query                 string
		buckets               int
		width                 int64
		succeeded, failed, dl int64
	}{
		{"", 60, 60, 1, 1, 2},
		{"?range=hour&endpoint=shop", 60, 60, 1, 1, 1},
		{"?range=day&endpoint=shop", 96, 900, 1, 1, 2},
		{"?range=week", 84, 7200, 1, 1, 3},
		{"?range=week&endpoint=off", 84, 7200, 0, 0, 1},
	} {
		res, body := do(t, c, "GET", b.url+"/api/charts"+tc.query, nil, bearer...)
		var a chartsAnswer
		if err := json.Unmarshal([]byte(body), &a); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.query, res.StatusCode, body)
		}
		var ok, failed, dl int64
		for i, k := range a.Buckets {
			ok, failed, dl = ok+k.Succeeded, failed+k.Failed, dl+k.DeadLettered
			if want := a.From.Add(time.Duration(int64(i)*a.BucketSeconds) * time.Second); !k.Start.Equal(want) {
				t.Fatalf("%s: bucket %d starts %v, want %v", tc.query, i, k.Start, want)
			}
		}
		last := a.Buckets[len(a.Buckets)-1].Start
		if len(a.Buckets) != tc.buckets || a.BucketSeconds != tc.width || ok != tc.succeeded || failed != tc.failed || dl != tc.dl ||
			a.To.Before(last) || !a.To.Before(last.Add(time.Duration(a.BucketSeconds)*time.Second)) {
			t.Errorf("%s: %d buckets of %d s, %d delivered, %d failed, %d dead, from %v to %v; want %+v", tc.query, len(a.Buckets), a.BucketSeconds,
				ok, failed, dl, a.From, a.To, tc)
		}
	}
	for query, code := range map[string]int{"?range=month": http.StatusBadRequest, "?endpoint=nobody": http.StatusNotFound} {
		if res, body := do(t, c, "GET", b.url+"/api/charts"+query, nil, bearer...); res.StatusCode != code || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s, want %d", query, res.StatusCode, body, code)
		}
	}
	if res, _ := do(t, c, "GET", b.url+"/api/charts", nil); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", res.StatusCode)
	}
}

// The overview and an endpoint's page draw their charts for the range
// asked (the hour by default, marked current in the links); the figures'
// refresh (X-Console-Refresh) reads and draws none; an unknown range is a
// 400.
func TestChartsOnPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	for page, want := range map[string][]string{
		"/":                         {`data-range="hour"`, `aria-current="page">last hour`, "Deliveries per minute — every endpoint, last hour"},
		"/?range=week":              {`data-range="week"`, `aria-current="page">last week`, "Deliveries per 2 h — every endpoint, last week"},
		"/endpoints/shop?range=day": {`data-range="day"`, "Response time per 15 min — shop, last day", `<g class="series" data-series="p99">`},
	} {
		res, body := do(t, c, "GET", b.url+page, nil, bearer...)
		if res.StatusCode != http.StatusOK || strings.Count(body, `<svg `) != 3 {
			t.Fatalf("%s: %d, %d charts", page, res.StatusCode, strings.Count(body, `<svg `))
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %q", page, w)
			}
		}
		res, body = do(t, c, "GET", b.url+page, nil, append(bearer, "X-Console-Refresh", "1")...)
		if res.StatusCode != http.StatusOK || strings.Contains(body, "<svg") || !strings.Contains(body, "data-refresh") {
			t.Errorf("%s refreshed: %d, charts drawn or figures missing", page, res.StatusCode)
		}
	}
	if res, _ := do(t, c, "GET", b.url+"/?range=year", nil, bearer...); res.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown range: %d, want 400", res.StatusCode)
	}
}
