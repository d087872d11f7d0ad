package console

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
)

func TestNiceScale(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		highest   float64
		whole     bool
		top, step float64
		decimals  int
	}{
		{0, true, 1, 1, 0}, {0, false, 1, 1, 0}, {1, true, 1, 1, 0}, {3, true, 3, 1, 0}, {7, true, 8, 2, 0}, {10, true, 10, 5, 0},
		{10, false, 10, 2.5, 1}, {20, false, 20, 5, 0}, {97.6, false, 100, 25, 0}, {140, true, 150, 50, 0}, {761, false, 800, 200, 0},
		{0.4, false, 0.4, 0.1, 1}, {0.9, false, 1, 0.25, 2},
	} {
		top, step := niceScale(c.highest, c.whole)
		if top != c.top || step != c.step || decimals(step) != c.decimals {
			t.Errorf("niceScale(%v, %v) = %v, %v (%d decimals); want %v, %v (%d)", c.highest, c.whole, top, step, decimals(step), c.top, c.step, c.decimals)
		}
	}
}

func TestBucketName(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{time.Minute: "minute", 15 * time.Minute: "15 min", time.Hour: "hour", 2 * time.Hour: "2 h"} {
		if got := bucketName(d); got != want {
			t.Errorf("bucketName(%v) = %q, want %q", d, got, want)
		}
	}
}

func f(v float64) *float64 { return &v }
func n(v int64) *int64     { return &v }

// knownCharts are four minutes of an endpoint whose name holds markup:
// 7 delivered and 1 failed, then nothing, then 2 and 3 with a dead
// letter, then 4; latencies with a gap; backlog sampled in two minutes.
func knownCharts() *Charts {
	from := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return from.Add(time.Duration(i) * time.Minute) }
	return &Charts{Endpoint: `<b>"shop"&co`, Range: "hour", From: from, To: at(3).Add(30 * time.Second), BucketSeconds: 60,
		Buckets: []outbox.ChartBucket{
			{Start: at(0), Succeeded: 7, Failed: 1, P50MS: f(12.5), P99MS: f(40), Backlog: n(30)},
			{Start: at(1)},
			{Start: at(2), Succeeded: 2, Failed: 3, DeadLettered: 1, P50MS: f(20), P99MS: f(97.6), Backlog: n(0)},
			{Start: at(3), Succeeded: 4, P50MS: f(10), P99MS: f(11)},
		}}
}

// series is the markup of the series key of chart.
func series(t *testing.T, svg, chart, key string) string {
	t.Helper()
	_, rest, ok := strings.Cut(svg, `data-chart="`+chart+`"`)
	if !ok {
		t.Fatalf("no chart %s in:\n%s", chart, svg)
	}
	_, rest, ok = strings.Cut(rest, `data-series="`+key+`">`)
	if !ok {
		t.Fatalf("no series %s in chart %s", key, chart)
	}
	body, _, _ := strings.Cut(rest, "</g>")
	return body
}

// The three charts of known data: each with its title (scope, range, UTC
// times), legend, axis labels and units; the bars stacked with their
// values in their tooltips, the lines broken where there is no value,
// and nothing a CSP without inline styles and scripts would refuse.
func TestChartsSVG(t *testing.T) {
	t.Parallel()
	svg := string(chartsSVG(knownCharts()))
	if c := strings.Count(svg, "<svg "); c != 3 {
		t.Fatalf("%d charts, want 3", c)
	}
	for _, bad := range []string{"style=", "<script", "<style", "javascript:", `<b>`, `"shop"`} {
		if strings.Contains(svg, bad) {
			t.Errorf("the charts hold %q", bad)
		}
	}
	for _, want := range []string{
		`Deliveries per minute — &lt;b&gt;&#34;shop&#34;&amp;co, last hour (2026-12-01 09:00 – 2026-12-01 09:03 UTC)`,
		`Response time per minute — &lt;b&gt;`, `Backlog — &lt;b&gt;`,
		`>delivered (2xx)</text>`, `>failed attempts</text>`, `>dead-lettered</text>`, `>p50</text>`, `>p99</text>`,
		`>backlog (highest sample of each minute)</text>`,
		`>count per minute</text>`, `>milliseconds</text>`, `>pending deliveries</text>`, `>time (UTC)</text>`,
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("no %q in the charts", want)
		}
	}
	// Deliveries: the highest stack is 8: an axis to 8 by 2.
	ticks := func(chart string) []string {
		_, rest, _ := strings.Cut(svg, `data-chart="`+chart+`"`)
		rest, _, _ = strings.Cut(rest, "</svg>")
		var out []string
		for _, m := range regexp.MustCompile(`class="tick" x="\d+" y="[\d.]+" text-anchor="end">([^<]*)<`).FindAllStringSubmatch(rest, -1) {
			out = append(out, m[1])
		}
		return out
	}
	if got := strings.Join(ticks("deliveries"), " "); got != "0 2 4 6 8" {
		t.Errorf("deliveries' axis: %s", got)
	}
	if got := strings.Join(ticks("latency"), " "); got != "0 25 50 75 100" {
		t.Errorf("latency's axis: %s", got)
	}
	if got := strings.Join(ticks("backlog"), " "); got != "0 10 20 30" {
		t.Errorf("backlog's axis: %s", got)
	}
	ok := series(t, svg, "deliveries", "succeeded")
	if c := strings.Count(ok, "<rect"); c != 3 {
		t.Errorf("%d delivered bars, want 3 (none for the empty minute)", c)
	}
	for _, tip := range []string{"2026-12-01 09:00 UTC · delivered (2xx): 7", "2026-12-01 09:03 UTC · delivered (2xx): 4"} {
		if !strings.Contains(ok, "<title>"+tip+"</title>") {
			t.Errorf("no tooltip %q in %s", tip, ok)
		}
	}
	// The failed bar of 09:02 (3) stands on its delivered one (2): from 2 to 5 of 8.
	failed := series(t, svg, "deliveries", "failed")
	if !strings.Contains(failed, "failed attempts: 3</title>") || strings.Count(failed, "<rect") != 2 {
		t.Errorf("failed bars: %s", failed)
	}
	if m := regexp.MustCompile(`y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="#d4a72c"><title>2026-12-01 09:02`).FindStringSubmatch(failed); m == nil ||
		m[1] != "132.5" || m[2] != "70.5" {
		t.Errorf("the failed bar of 09:02: %v (want y 132.5 = 250-5/8*188, height 70.5 = 3/8*188)", m)
	}
	if dead := series(t, svg, "deliveries", "dead_lettered"); strings.Count(dead, "<circle") != 1 || !strings.Contains(dead, "dead-lettered: 1</title>") {
		t.Errorf("dead letters: %s", dead)
	}
	// p99: a line broken at the empty minute, a dot at each value.
	p99 := series(t, svg, "latency", "p99")
	if d := regexp.MustCompile(`d="([^"]*)"`).FindStringSubmatch(p99); d == nil || strings.Count(d[1], "M") != 2 || strings.Count(d[1], "L") != 1 {
		t.Errorf("p99's path: %v", d)
	}
	if strings.Count(p99, "<circle") != 3 || !strings.Contains(p99, "p99: 97.6 ms</title>") {
		t.Errorf("p99's dots: %s", p99)
	}
	if b := series(t, svg, "backlog", "backlog"); strings.Count(b, "<circle") != 1 || !strings.Contains(b, "2026-12-01 09:00 UTC · backlog (highest sample of each minute): 30") {
		t.Errorf("backlog: %s", b)
	}
	if strings.Contains(svg, `class="empty"`) {
		t.Error("a chart with values says it is empty")
	}
}

// Charts without values say so in the plot: no attempt, no backlog
// sampled, or a backlog of 0 all along.
func TestChartsSVGEmpty(t *testing.T) {
	t.Parallel()
	c := knownCharts()
	for i := range c.Buckets {
		c.Buckets[i] = outbox.ChartBucket{Start: c.Buckets[i].Start}
	}
	svg := string(chartsSVG(c))
	for _, want := range []string{"No attempt and no dead letter in this range.", "No attempt in this range.", "No backlog sampled in this range"} {
		if !strings.Contains(svg, want) {
			t.Errorf("no %q", want)
		}
	}
	c.Buckets[1].Backlog = n(0)
	if svg := string(chartsSVG(c)); !strings.Contains(svg, "No backlog in this range.") {
		t.Error("a backlog of 0 all along is not said")
	}
}

// The time axis is labelled at whole steps: every 10 minutes of an hour,
// 3 hours of a day, and at each day of a week.
func TestTimeAxisLabels(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 12, 1, 9, 7, 0, 0, time.UTC)
	for _, c := range []struct {
		rg    ChartRange
		first string
		count int
	}{{ChartRanges[0], "09:10", 6}, {ChartRanges[1], "09:00", 8}, {ChartRanges[2], "Dec 02", 7}} {
		ch := svgChart{Bucket: c.rg.Bucket, Starts: make([]time.Time, c.rg.Count)}
		ch.Starts[0] = from.Truncate(c.rg.Bucket)
		var b strings.Builder
		ch.xAxis(&b)
		labels := regexp.MustCompile(`text-anchor="middle">([^<]*)<`).FindAllStringSubmatch(b.String(), -1)
		if len(labels) != c.count || labels[0][1] != c.first {
			t.Errorf("%s: labels %v, want %d from %s", c.rg.Name, labels, c.count, c.first)
		}
	}
}
