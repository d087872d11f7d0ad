package console

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"time"
)

// A chart drawn on the server as inline SVG: no script, no style
// attribute (the CSP allows neither), only SVG's presentation attributes
// and the console's stylesheet. Every text is escaped with
// html.EscapeString.

// The chart's box, in SVG units: the plot between the margins.
const (
	svgWidth, svgHeight     = 960, 300
	plotLeft, plotRight     = 72, 944
	plotTop, plotBottom     = 62, 250
	titleY, legendY, xTextY = 22, 44, 268
)

// svgSeries is one series of a chart: stacked bars (in the order given,
// from the axis up) or a line with a dot at each value but 0.
type svgSeries struct {
	Key, Label, Color string
	Bars              bool
	// Values, one a bucket; nil: none (a gap in a line).
	Values []*float64
}

// svgChart is one chart over buckets of equal width.
type svgChart struct {
	Key, Title string
	Unit       string // the y axis's label
	Starts     []time.Time
	Bucket     time.Duration
	Series     []svgSeries
	// Empty is said in the plot when no series has a value other than 0.
	Empty string
	// Value formats a value for its tooltip.
	Value func(float64) string
	// Whole: the values are counts, the axis's steps whole numbers.
	Whole bool
}

// render writes the chart's <svg>.
func (c svgChart) render() string {
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="%s" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="chart-%s" font-family="system-ui, sans-serif" font-size="12" fill="#1b1f24">`+"\n",
		esc(c.Key), svgWidth, svgHeight, svgWidth, svgHeight, esc(c.Key))
	fmt.Fprintf(&b, `<title id="chart-%s">%s</title>`+"\n", esc(c.Key), esc(c.Title))
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="15" font-weight="600">%s</text>`+"\n", plotLeft, titleY, esc(c.Title))
	c.legend(&b)
	top, step := niceScale(c.highest(), c.Whole)
	c.yAxis(&b, top, step)
	c.xAxis(&b)
	for _, s := range c.Series {
		fmt.Fprintf(&b, `<g class="series" data-series="%s">`+"\n", esc(s.Key))
		if s.Bars {
			c.bars(&b, s, top)
		} else {
			c.line(&b, s, top)
		}
		b.WriteString("</g>\n")
	}
	if c.empty() {
		fmt.Fprintf(&b, `<text class="empty" x="%d" y="%d" text-anchor="middle" fill="#5b6470">%s</text>`+"\n",
			(plotLeft+plotRight)/2, (plotTop+plotBottom)/2, esc(c.Empty))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// legend writes a swatch and the label of each series, left to right.
func (c svgChart) legend(b *strings.Builder) {
	x := plotLeft
	for _, s := range c.Series {
		if s.Bars {
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`, x, legendY-10, s.Color)
		} else {
			fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"/>`, x, legendY-4, x+14, legendY-4, s.Color)
		}
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x+18, legendY, html.EscapeString(s.Label))
		x += 18 + 7*len(s.Label) + 24
	}
}

// highest is the top of the stacked bars or the highest value of a line.
func (c svgChart) highest() float64 {
	top := 0.0
	for i := range c.Starts {
		stack := 0.0
		for _, s := range c.Series {
			if v := s.Values[i]; v != nil {
				if s.Bars {
					stack += *v
				} else {
					top = max(top, *v)
				}
			}
		}
		top = max(top, stack)
	}
	return top
}

// empty says whether no series has a value other than 0.
func (c svgChart) empty() bool {
	for _, s := range c.Series {
		for _, v := range s.Values {
			if v != nil && *v != 0 {
				return false
			}
		}
	}
	return true
}

// y is the height of v on a scale to top.
func y(v, top float64) float64 {
	return plotBottom - v/top*(plotBottom-plotTop)
}

// slot is one bucket's width.
func (c svgChart) slot() float64 { return float64(plotRight-plotLeft) / float64(len(c.Starts)) }

// yAxis writes the grid, the tick labels and the axis's label.
func (c svgChart) yAxis(b *strings.Builder, top, step float64) {
	d := decimals(step)
	for i := 0; float64(i)*step <= top+step/2; i++ {
		v := float64(i) * step
		yy := y(v, top)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e6ea"/>`, plotLeft, yy, plotRight, yy)
		fmt.Fprintf(b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft-6, yy+4, strconv.FormatFloat(v, 'f', d, 64))
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#5b6470"/>`, plotLeft, plotTop, plotLeft, plotBottom)
	fmt.Fprintf(b, `<text class="unit" transform="translate(16 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		(plotTop+plotBottom)/2, html.EscapeString(c.Unit))
}

// labelSteps are the spacings of the time axis's labels; the smallest
// that gives at most 8 labels is used.
var labelSteps = []time.Duration{5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour,
	2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour}

// xAxis writes the time axis: a label at each whole step (UTC), the time
// of day, or the date for steps of a day.
func (c svgChart) xAxis(b *strings.Builder) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#5b6470"/>`+"\n", plotLeft, plotBottom, plotRight, plotBottom)
	if len(c.Starts) == 0 {
		return
	}
	from := c.Starts[0]
	span := time.Duration(len(c.Starts)) * c.Bucket
	step := labelSteps[len(labelSteps)-1]
	for _, s := range labelSteps {
		if span/s <= 8 {
			step = s
			break
		}
	}
	layout := "15:04"
	if step >= 24*time.Hour {
		layout = "Jan 02"
	}
	for t := from.Truncate(step); t.Before(from.Add(span)); t = t.Add(step) {
		if t.Before(from) {
			continue
		}
		x := float64(plotLeft) + float64(t.Sub(from))/float64(c.Bucket)*c.slot()
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#5b6470"/>`, x, plotBottom, x, plotBottom+5)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, xTextY, t.UTC().Format(layout))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" fill="#5b6470">time (UTC)</text>`+"\n", plotRight, svgHeight-8)
}

// bars writes s's bars on top of the series before it.
func (c svgChart) bars(b *strings.Builder, s svgSeries, top float64) {
	w := c.slot()
	for i, v := range s.Values {
		if v == nil || *v == 0 {
			continue
		}
		base := 0.0
		for _, under := range c.Series {
			if under.Key == s.Key {
				break
			}
			if u := under.Values[i]; under.Bars && u != nil {
				base += *u
			}
		}
		y0, y1 := y(base, top), y(base+*v, top)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
			float64(plotLeft)+float64(i)*w+w*0.1, y1, w*0.8, y0-y1, s.Color, c.tooltip(i, s, *v))
	}
}

// line writes s as a line through the middle of its buckets, broken where
// a bucket has no value, with a dot at each value but 0.
func (c svgChart) line(b *strings.Builder, s svgSeries, top float64) {
	w := c.slot()
	var path strings.Builder
	pen := false
	for i, v := range s.Values {
		if v == nil {
			pen = false
			continue
		}
		cmd := "L"
		if !pen {
			cmd = "M"
		}
		fmt.Fprintf(&path, "%s%.1f %.1f ", cmd, float64(plotLeft)+(float64(i)+0.5)*w, y(*v, top))
		pen = true
	}
	if path.Len() > 0 {
		fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"/>`+"\n", strings.TrimSpace(path.String()), s.Color)
	}
	for i, v := range s.Values {
		if v != nil && *v != 0 { // no dot on the axis: a 0 is the line alone
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s</title></circle>`+"\n",
				float64(plotLeft)+(float64(i)+0.5)*w, y(*v, top), s.Color, c.tooltip(i, s, *v))
		}
	}
}

// tooltip is a value's title: its bucket, its series, the value.
func (c svgChart) tooltip(i int, s svgSeries, v float64) string {
	return html.EscapeString(c.Starts[i].UTC().Format("2006-01-02 15:04") + " UTC · " + s.Label + ": " + c.Value(v))
}

// niceScale is the top of an axis for values up to highest, and its step:
// 1, 2, 2.5 (not for whole numbers) or 5 times a power of ten, two to
// four steps to the top, or one step to 1 for an axis without values.
func niceScale(highest float64, whole bool) (top, step float64) {
	if highest <= 0 || math.IsNaN(highest) || math.IsInf(highest, 0) {
		return 1, 1
	}
	raw := highest / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; step >= raw && !(whole && m == 2.5) {
			break
		}
	}
	if whole {
		step = max(step, 1)
	}
	return math.Ceil(highest/step-1e-9) * step, step
}

// decimals is how many decimals the multiples of step need (at most 3).
func decimals(step float64) int {
	d := 0
	for p := step; d < 3 && math.Abs(p-math.Round(p)) > 1e-9; p *= 10 {
		d++
	}
	return d
}
