package console

import (
	"html/template"
	"strconv"
	"strings"
	"time"
)

// The three charts of a page, from its Charts: deliveries, response time,
// backlog.

// Series colors: GitHub's palette, told apart by hue and by shape (bars,
// lines).
const (
	colorDelivered = "#2da44e"
	colorFailed    = "#d4a72c"
	colorDead      = "#cf222e"
	colorP50       = "#0969da"
	colorP99       = "#8250df"
	colorBacklog   = "#1b7c83"
)

// chartsSVG is the page's three charts.
func chartsSVG(c *Charts) template.HTML {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for _, ch := range []svgChart{deliveriesChart(c), latencyChart(c), backlogChart(c)} {
		b.WriteString(ch.render())
	}
	return template.HTML(b.String()) // render escapes every text
}

// base is a chart of c's buckets titled what, with c's scope and range.
func base(c *Charts, key, what string) svgChart {
	starts := make([]time.Time, len(c.Buckets))
	for i, k := range c.Buckets {
		starts[i] = k.Start
	}
	scope := "every endpoint"
	if c.Endpoint != "" {
		scope = c.Endpoint
	}
	label := c.Range
	for _, r := range ChartRanges {
		if r.Name == c.Range {
			label = r.Label
		}
	}
	title := what + " — " + scope + ", " + label + " (" + c.From.UTC().Format("2006-01-02 15:04") + " – " + c.To.UTC().Format("2006-01-02 15:04") + " UTC)"
	return svgChart{Key: key, Title: title, Starts: starts, Bucket: time.Duration(c.BucketSeconds) * time.Second}
}

// deliveriesChart: delivered and failed attempts as stacked bars, the dead
// letters as a line.
func deliveriesChart(c *Charts) svgChart {
	per := bucketName(time.Duration(c.BucketSeconds) * time.Second)
	ch := base(c, "deliveries", "Deliveries per "+per)
	ch.Unit, ch.Whole, ch.Empty = "count per "+per, true, "No attempt and no dead letter in this range."
	ch.Value = func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	ok, failed, dead := make([]*float64, len(c.Buckets)), make([]*float64, len(c.Buckets)), make([]*float64, len(c.Buckets))
	for i, k := range c.Buckets {
		ok[i], failed[i], dead[i] = count(k.Succeeded), count(k.Failed), count(k.DeadLettered)
	}
	ch.Series = []svgSeries{
		{Key: "succeeded", Label: "delivered (2xx)", Color: colorDelivered, Bars: true, Values: ok},
		{Key: "failed", Label: "failed attempts", Color: colorFailed, Bars: true, Values: failed},
		{Key: "dead_lettered", Label: "dead-lettered", Color: colorDead, Values: dead},
	}
	return ch
}

// latencyChart: the median and 99th percentile of the attempts' durations,
// as lines (none where a bucket has no attempt).
func latencyChart(c *Charts) svgChart {
	ch := base(c, "latency", "Response time per "+bucketName(time.Duration(c.BucketSeconds)*time.Second))
	ch.Unit, ch.Empty = "milliseconds", "No attempt in this range."
	ch.Value = func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " ms" }
	p50, p99 := make([]*float64, len(c.Buckets)), make([]*float64, len(c.Buckets))
	for i, k := range c.Buckets {
		p50[i], p99[i] = k.P50MS, k.P99MS
	}
	ch.Series = []svgSeries{
		{Key: "p50", Label: "p50", Color: colorP50, Values: p50},
		{Key: "p99", Label: "p99", Color: colorP99, Values: p99},
	}
	return ch
}

// backlogChart: the highest backlog sampled in each bucket, as a line
// (none where no worker sampled).
func backlogChart(c *Charts) svgChart {
	ch := base(c, "backlog", "Backlog")
	ch.Unit, ch.Whole, ch.Empty = "pending deliveries", true, "No backlog sampled in this range (the workers sample it once a minute)."
	ch.Value = func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	vals := make([]*float64, len(c.Buckets))
	for i, k := range c.Buckets {
		if k.Backlog != nil {
			vals[i], ch.Empty = count(*k.Backlog), "No backlog in this range."
		}
	}
	ch.Series = []svgSeries{{Key: "backlog", Label: "backlog (highest sample of each " + bucketName(ch.Bucket) + ")", Color: colorBacklog, Values: vals}}
	return ch
}

func count(n int64) *float64 {
	f := float64(n)
	return &f
}

// bucketName is a bucket's width in words: "minute", "15 min", "2 h".
func bucketName(d time.Duration) string {
	switch {
	case d == time.Minute:
		return "minute"
	case d == time.Hour:
		return "hour"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min"
	}
	return strconv.Itoa(int(d/time.Hour)) + " h"
}
