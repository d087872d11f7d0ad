package console

import (
	"html"
	"html/template"
	"net/url"
	"strconv"
	"strings"
)

// endpointRows writes the overview's endpoint rows in Go, every value
// escaped with html.EscapeString (names in links with url.PathEscape
// first): html/template escapes each cell through its contextual
// escapers, which dominated the overview's time with many endpoints; these
// cells are all plain text or attributes, for which EscapeString is
// enough.
func endpointRows(eps []Endpoint) template.HTML {
	var b strings.Builder
	b.Grow(len(eps) * 256)
	esc := html.EscapeString
	for _, e := range eps {
		name := esc(e.Name)
		b.WriteString(`<tr data-endpoint="` + name + `"><td><a href="/endpoints/` + esc(url.PathEscape(e.Name)) + `">` + name + `</a></td><td>`)
		switch {
		case !e.Enabled:
			b.WriteString(`<span class="bad">disabled</span>: ` + esc(e.DisabledReason))
		case e.FailingSince != nil:
			b.WriteString(`<span class="warn">failing since ` + fmtTime(e.FailingSince) + `</span>`)
		default:
			b.WriteString(`<span class="ok">enabled</span>`)
		}
		b.WriteString(breakerText(e.Breaker) + flowText(e.Flow))
		if e.Filter != "" {
			b.WriteString(` <span class="flow" title="` + esc(e.Filter) + `">filtered</span>`)
		}
		for _, cell := range []string{strconv.FormatInt(e.Backlog, 10), strconv.FormatInt(e.DeadLetters, 10),
			strconv.FormatInt(e.AttemptsLastHour, 10), fmtPct(e.SuccessRate), fmtMS(e.P50MS), fmtMS(e.P99MS)} {
			b.WriteString(`</td><td>` + esc(cell))
		}
		b.WriteString(`</td><td class="err">` + esc(e.LastError) + "</td></tr>\n")
	}
	return template.HTML(b.String()) // every value above is escaped
}

// flowText is an endpoint's flow control and pause after the state
// (escaped), else "".
func flowText(f *Flow) string {
	if f == nil {
		return ""
	}
	var b strings.Builder
	if f.PausedUntil != nil {
		b.WriteString(` <span class="warn">paused by its consumer until ` + fmtTime(f.PausedUntil) + `</span>`)
	}
	if f.Rate != "" {
		b.WriteString(` <span class="flow">rate ` + html.EscapeString(f.Rate) + `</span>`)
	}
	if f.MaxInFlight > 0 {
		b.WriteString(` <span class="flow">at most ` + strconv.Itoa(f.MaxInFlight) + ` in flight</span>`)
	}
	return b.String()
}

// breakerText is an open or half-open breaker's note after the state
// (escaped), else "".
func breakerText(b *Breaker) string {
	switch {
	case b == nil || b.State == "closed":
		return ""
	case b.State == "open" && b.OpenUntil != nil:
		return ` <span class="bad">breaker open until ` + fmtTime(b.OpenUntil) + `</span>`
	}
	return ` <span class="warn">breaker ` + html.EscapeString(b.State) + `</span>`
}
