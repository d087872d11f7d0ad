package console_test

import (
	"os"
	"testing"

	"github.com/chromedp/chromedp"
)

// chartData adds to demoData an incident of audit's for the charts: from
// 45 to 25 minutes ago most of its attempts fail, slowly, a few deliveries
// are dead-lettered and its backlog grows, then drains. Its backlog and
// billing's are sampled every minute of the hour (billing's every third).
func chartData(t *testing.T, b bundle) {
	t.Helper()
	b.exec(t, `INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class, error)
		SELECT gen_random_uuid(), e.id, 1, now() - g * interval '1 minute' - k * interval '4 seconds',
		       CASE WHEN x.bad THEN 250 + (k * 37) % 700 ELSE 25 + (k * 13) % 60 END,
		       CASE WHEN x.bad THEN 503 ELSE 200 END, CASE WHEN x.bad THEN 'retryable' END, CASE WHEN x.bad THEN 'http 503' END
		FROM webhook_endpoints e, generate_series(1, 59) g, generate_series(1, 14) k,
		     LATERAL (SELECT g BETWEEN 25 AND 45 AND k % 4 <> 0 AS bad) x
		WHERE e.name = 'audit'`)
	b.exec(t, `INSERT INTO webhook_backlog_samples (sampled_at, endpoint_id, backlog)
		SELECT date_trunc('minute', now()) - g * interval '1 minute', e.id,
		       CASE WHEN e.name = 'billing' THEN 3 + g % 4 WHEN g > 45 THEN 0 WHEN g >= 25 THEN (45 - g) * 7 ELSE greatest(0, 140 - (25 - g) * 10) END
		FROM generate_series(0, 59) g, webhook_endpoints e
		WHERE e.name = 'audit' OR (e.name = 'billing' AND g % 3 = 0)
		UNION ALL
		SELECT date_trunc('minute', now()) - g * interval '1 minute', '00000000-0000-0000-0000-000000000000', 0
		FROM generate_series(0, 59) g`)
	b.exec(t, `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id, died_at)
		SELECT gen_random_uuid(), 'invoice.paid', '{}', 16, 503, 'http 503', id, now() - g * interval '1 minute'
		FROM webhook_endpoints, unnest('{27, 31, 31, 36, 40, 40, 40, 44}'::int[]) g WHERE name = 'audit'`)
}

// seriesShown counts, in a page's charts, the marks of each series: bars
// and dots (a line has one dot a value).
const seriesShown = `Object.fromEntries([...document.querySelectorAll("svg.chart g.series")].map(
	g => [g.closest("svg").dataset.chart + "/" + g.dataset.series, g.querySelectorAll("rect, circle").length]))`

// A real browser shows the charts under the overview's figures (every
// endpoint) and on an endpoint's page (its own), each series drawn, and
// keeps them while the figures refresh; the range links switch to a day.
// CONSOLE_CHARTS_SCREENSHOT=path keeps a screenshot of audit's charts
// (docs/console-charts.png).
func TestBrowserCharts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	demoData(t, b)
	chartData(t, b)
	ctx := browser(t)
	var overview, audit, day map[string]float64
	var shot []byte
	var rangeShown string
	err := chromedp.Run(ctx,
		chromedp.Navigate(b.url+"/"),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", testToken, chromedp.ByID),
		clickToPage("#login", chromedp.ByID),
		chromedp.WaitVisible(`svg[data-chart="backlog"]`, chromedp.ByQuery),
		chromedp.WaitReady("body[data-refreshed]", chromedp.ByQuery), // the figures refreshed; the charts stay
		chromedp.WaitVisible(`svg[data-chart="deliveries"]`, chromedp.ByQuery),
		chromedp.Evaluate(seriesShown, &overview),
		clickToPage(`.ranges a[href="?range=day"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#charts[data-range="day"] svg[data-chart="latency"]`, chromedp.ByQuery),
		chromedp.Evaluate(seriesShown, &day),
		chromedp.Navigate(b.url+"/endpoints/audit?range=hour"),
		chromedp.WaitVisible(`svg[data-chart="backlog"]`, chromedp.ByQuery),
		chromedp.Evaluate(seriesShown, &audit),
		chromedp.AttributeValue(`.ranges a[aria-current="page"]`, "href", &rangeShown, nil, chromedp.ByQuery),
		chromedp.Screenshot("#charts", &shot, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("charts in the browser: %v", err)
	}
	// Every minute of the hour has attempts (audit's and billing's), some
	// failed; audit's dead letters, latencies and backlog are drawn.
	for page, marks := range map[string]map[string]float64{"overview": overview, "audit": audit} {
		for _, s := range []string{"deliveries/succeeded", "deliveries/failed", "deliveries/dead_lettered", "latency/p50", "latency/p99", "backlog/backlog"} {
			if marks[s] == 0 {
				t.Errorf("%s: no mark of %s (%v)", page, s, marks)
			}
		}
		if marks["latency/p50"] < 58 || marks["backlog/backlog"] < 30 {
			t.Errorf("%s: %v dots of p50 (want one a minute with attempts), %v of the backlog (want one a minute with a backlog)", page, marks["latency/p50"], marks["backlog/backlog"])
		}
	}
	if day["deliveries/succeeded"] == 0 || day["backlog/backlog"] == 0 || day["backlog/backlog"] > 5 {
		t.Errorf("the day's charts: %v (want the hour's samples in at most 5 quarters)", day)
	}
	if rangeShown != "?range=hour" {
		t.Errorf("the range marked current: %q", rangeShown)
	}
	if p := os.Getenv("CONSOLE_CHARTS_SCREENSHOT"); p != "" {
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
