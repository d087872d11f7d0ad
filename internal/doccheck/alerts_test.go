package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rule is one rule of alerts.yml, its keys flattened: "alert" or
// "record", "expr", "for", "labels.severity", "annotations.summary" ….
type rule map[string]string

var (
	ruleStart = regexp.MustCompile(`^(\s*)- (alert|record):\s*(.*)$`)
	keyLine   = regexp.MustCompile(`^(\s*)([a-z_]+):\s*(.*)$`)
)

// parseRules reads the rules of a rules file written in the subset of YAML
// alerts.yml uses: plain or double-quoted scalars, `|` and `>-` blocks,
// and one level of nested maps (labels, annotations). Anything else is an
// error, so the file cannot drift out of what this reads.
func parseRules(text string) ([]rule, error) {
	var out []rule
	lines := strings.Split(text, "\n")
	var cur rule
	itemIndent, parentIndent, parent := 0, -1, ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if m := ruleStart.FindStringSubmatch(l); m != nil {
			cur = rule{m[2]: m[3]}
			out = append(out, cur)
			itemIndent, parentIndent, parent = len(m[1])+2, -1, ""
			continue
		}
		if cur == nil {
			continue // groups: and the group's name
		}
		m := keyLine.FindStringSubmatch(l)
		if m == nil {
			return nil, fmt.Errorf("line %d: not read: %q", i+1, l)
		}
		indent, key, val := len(m[1]), m[2], m[3]
		switch {
		case indent < itemIndent:
			cur = nil // the next group
			continue
		case indent == itemIndent:
			parentIndent, parent = -1, ""
		case parentIndent >= 0 && indent > parentIndent:
			key = parent + "." + key
		default:
			return nil, fmt.Errorf("line %d: unexpected indent: %q", i+1, l)
		}
		switch val {
		case "":
			parentIndent, parent = indent, key
			continue
		case "|", ">-":
			var block []string
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || indentOf(lines[i+1]) > indent) {
				i++
				block = append(block, strings.TrimSpace(lines[i]))
			}
			sep := "\n"
			if val == ">-" {
				sep = " "
			}
			val = strings.TrimSpace(strings.Join(block, sep))
		default:
			if strings.HasPrefix(val, `"`) {
				u, err := strconv.Unquote(val)
				if err != nil {
					return nil, fmt.Errorf("line %d: %v", i+1, err)
				}
				val = u
			}
		}
		cur[key] = val
	}
	return out, nil
}

func indentOf(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

func rules(t *testing.T) []rule {
	t.Helper()
	rs, err := parseRules(readRepo(t, "deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	return rs
}

const runbookBase = "https://github.com/fluxora/webhook-worker/blob/main/"

// Every alert has a for:, a severity, a summary, a description and a
// runbook link to a heading that exists; and a unit test in alerts_test.yml.
func TestAlertsAreComplete(t *testing.T) {
	t.Parallel()
	tests := readRepo(t, "deploy/prometheus/alerts_test.yml")
	alerts := 0
	for _, r := range rules(t) {
		name := r["alert"]
		if name == "" {
			continue
		}
		alerts++
		if r["for"] == "" {
			t.Errorf("%s: no for:", name)
		}
		if s := r["labels.severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", name, s)
		}
		for _, k := range []string{"summary", "description"} {
			if r["annotations."+k] == "" {
				t.Errorf("%s: no %s annotation", name, k)
			}
		}
		if why := brokenRunbook(t, r["annotations.runbook_url"]); why != "" {
			t.Errorf("%s: runbook_url %q: %s", name, r["annotations.runbook_url"], why)
		}
		if !strings.Contains(tests, "alertname: "+name+"\n") {
			t.Errorf("%s: no test in alerts_test.yml", name)
		}
	}
	if alerts != 6 {
		t.Errorf("%d alerts, want the six documented in docs/monitoring.md", alerts)
	}
}

// readRepo is the file at rel, a path from the repository's top.
func readRepo(t *testing.T, rel string) string {
	t.Helper()
	return read(t, filepath.Join(root(t), filepath.FromSlash(rel)))
}

// brokenRunbook says why url does not lead to a heading of a file in the
// repository ("" when it does).
func brokenRunbook(t *testing.T, url string) string {
	t.Helper()
	rel, ok := strings.CutPrefix(url, runbookBase)
	if !ok {
		return "not under " + runbookBase
	}
	file, anchor, ok := strings.Cut(rel, "#")
	if !ok {
		return "no #anchor"
	}
	b, err := os.ReadFile(filepath.Join(root(t), filepath.FromSlash(file)))
	if err != nil {
		return err.Error()
	}
	if !anchors(string(b))[anchor] {
		return "no heading with that anchor in " + file
	}
	return ""
}

func TestParseRules(t *testing.T) {
	t.Parallel()
	rs, err := parseRules(`groups:
  - name: g
    rules:
      - record: a:b
        expr: |
          sum(x)
            / 2
      - alert: A
        expr: x > 1
        for: 5m
        labels:
          severity: warning
        annotations:
          summary: "s \"q\""
          description: >-
            one
            two
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []rule{
		{"record": "a:b", "expr": "sum(x)\n/ 2"},
		{"alert": "A", "expr": "x > 1", "for": "5m", "labels.severity": "warning",
			"annotations.summary": `s "q"`, "annotations.description": "one two"},
	}
	if fmt.Sprint(rs) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", rs, want)
	}
	if _, err := parseRules("groups:\n  - name: g\n    rules:\n      - alert: A\n        [x]\n"); err == nil {
		t.Error("a line it cannot read was accepted")
	}
}
