package doccheck

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

var (
	// identifier is a PromQL name: a metric or a recording rule's (with
	// colons); label names and functions match too and are let through.
	identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// unknownNames lists the names in text that look like the worker's
// metrics (fluxora_webhook_…, or a recording rule with a colon) and are
// neither registered (histograms with their _bucket, _count and _sum)
// nor one of records. It also says when an expression names none.
func unknownNames(text string, known, records map[string]bool, isExpr bool) []string {
	var bad []string
	seen := false
	for _, id := range identifier.FindAllString(text, -1) {
		id = strings.Trim(id, ":") // prose's "word:", JSON's ":"
		switch {
		case strings.Contains(id, ":"):
			if !records[id] {
				bad = append(bad, id+" (no such recording rule)")
			}
			seen = true
		case strings.HasPrefix(id, "fluxora_webhook_"):
			base := id
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(id, s); ok && known[b] {
					base = b
				}
			}
			if !known[base] {
				bad = append(bad, id)
			}
			seen = true
		}
	}
	if isExpr && !seen {
		bad = append(bad, "(names no metric of the worker)")
	}
	return bad
}

func TestRulesNameOnlyRegisteredMetrics(t *testing.T) {
	t.Parallel()
	known := metricNames(t, root(t))
	rs := rules(t)
	records := map[string]bool{}
	for _, r := range rs {
		if r["record"] != "" {
			records[r["record"]] = true
		}
	}
	for _, r := range rs {
		name := r["alert"] + r["record"]
		for k, v := range r {
			if k == "expr" || strings.HasPrefix(k, "annotations.") && k != "annotations.runbook_url" {
				for _, bad := range unknownNames(v, known, records, k == "expr") {
					t.Errorf("%s: %s: %s", name, k, bad)
				}
			}
		}
	}
}

// dashboard is what the test reads of dashboard.json.
type dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func TestDashboardNamesOnlyRegisteredMetrics(t *testing.T) {
	t.Parallel()
	var d dashboard
	if err := json.Unmarshal([]byte(readRepo(t, "deploy/grafana/dashboard.json")), &d); err != nil {
		t.Fatalf("deploy/grafana/dashboard.json: %v", err)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: not a current Grafana's", d.SchemaVersion)
	}
	known := metricNames(t, root(t))
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if q, _ := json.Marshal(v.Query); v.Type == "query" {
			for _, bad := range unknownNames(string(q), known, nil, true) {
				t.Errorf("variable %s: %s", v.Name, bad)
			}
		}
	}
	if vars["datasource"] != "datasource" || vars["endpoint"] != "query" {
		t.Errorf("template variables %v: want datasource (datasource) and endpoint (query)", vars)
	}
	if len(d.Panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no queries", p.Title)
		}
		for _, tg := range p.Targets {
			for _, bad := range unknownNames(tg.Expr, known, nil, true) {
				t.Errorf("panel %q: %s", p.Title, bad)
			}
		}
	}
}

func TestUnknownNamesAreFound(t *testing.T) {
	t.Parallel()
	known := map[string]bool{"fluxora_webhook_lag_seconds": true}
	records := map[string]bool{"a:fluxora_webhook_lag_seconds:p99": true}
	for expr, want := range map[string]int{
		`rate(fluxora_webhook_lag_seconds_bucket{endpoint="x"}[5m])`: 0,
		`a:fluxora_webhook_lag_seconds:p99 > 1`:                      0,
		`rate(fluxora_webhook_lag_secs_bucket[5m])`:                  1,
		`b:fluxora_webhook_lag_seconds:p99 > 1`:                      1,
		`up == 0`:                                                    1,
		`fluxora_webhook_lag_seconds > 1 (seconds: none)`:            0,
	} {
		if got := unknownNames(expr, known, records, true); len(got) != want {
			t.Errorf("%s: %v, want %d", expr, got, want)
		}
	}
}
