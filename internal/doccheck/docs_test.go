// Package doccheck holds the tests that keep the user documentation
// (README.md and docs/*.md) true to the repository: its links resolve, the
// environment variables it documents are the ones cmd/worker reads, every
// metric the code registers is documented, and it carries no issue
// numbers or commit hashes. The commands of `worker --help` are checked
// in cmd/worker (docs_test.go there), which can read its command table.
package doccheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's top directory.
func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// docFiles are README.md and docs/*.md, relative to the root.
func docFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		out = append(out, rel)
	}
	return out
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prose is text with fenced code blocks blanked (their lines kept, so line
// numbers still count) and inline code spans removed: what a reader sees
// as text and links.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			lines[i] = ""
			continue
		}
		lines[i] = codeSpan.ReplaceAllString(l, "")
	}
	return lines
}

var codeSpan = regexp.MustCompile("`[^`]*`")

// anchors are the fragment ids of a markdown file: its headings' GitHub
// slugs (numbered -1, -2 … when repeated) and any <a id="…"> or name.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

var (
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
)

// slug is GitHub's anchor for a heading: its text (links reduced to their
// text) lower-cased, every character but letters, digits, spaces, - and _
// dropped, spaces turned into -.
func slug(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// brokenLinks lists the relative links and #anchors of file (relative to
// dir) that do not resolve, as "file:line: target: why".
func brokenLinks(t *testing.T, dir, file string) []string {
	t.Helper()
	var out []string
	self := read(t, filepath.Join(dir, file))
	for i, l := range prose(self) {
		for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
			target := m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			where := filepath.Join(dir, file)
			text := self
			if path != "" {
				where = filepath.Join(dir, filepath.Dir(file), path)
				b, err := os.ReadFile(where)
				if err != nil {
					if fi, serr := os.Stat(where); serr == nil && fi.IsDir() && frag == "" {
						continue
					}
					out = append(out, file+":"+strconv.Itoa(i+1)+": "+target+": no such file")
					continue
				}
				text = string(b)
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(where, ".md") {
				out = append(out, file+":"+strconv.Itoa(i+1)+": "+target+": an anchor into a file that is not markdown")
				continue
			}
			if !anchors(text)[frag] {
				out = append(out, file+":"+strconv.Itoa(i+1)+": "+target+": no heading or anchor #"+frag)
			}
		}
	}
	return out
}

// Every relative link and #anchor of README.md and docs/*.md resolves: the
// file exists, and the anchor is a heading's GitHub slug (or an explicit
// <a id>) in the file it points into.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	dir := root(t)
	for _, f := range docFiles(t, dir) {
		for _, b := range brokenLinks(t, dir, f) {
			t.Error(b)
		}
	}
}

func TestSlug(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{
		"Outbound trust: proxy, private CA, client certificates": "outbound-trust-proxy-private-ca-client-certificates",
		"Endpoints: many consumers":                              "endpoints-many-consumers",
		"`worker dlq replay`":                                    "worker-dlq-replay",
		"`worker` (no command): run the dispatcher":              "worker-no-command-run-the-dispatcher",
		"Health, metrics and logs":                               "health-metrics-and-logs",
		"Gates (Redis)":                                          "gates-redis",
		"[Link](x.md) text_with_underscore":                      "link-text_with_underscore",
		"WebhookBreakerOpen":                                     "webhookbreakeropen",
		"Alerts and dashboards":                                  "alerts-and-dashboards",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// The link check fails on what it must refuse: a missing file, a missing
// anchor in this file and in another, and passes a good link, a link
// inside code and an explicit anchor.
func TestBrokenLinksAreFound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/b.md", "# B\n\n## Two words: here\n<a id=\"explicit\"></a>\n```\n# not a heading\n```\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/b.md) [ok](docs/b.md#two-words-here) [ok](#top) [ok](docs/b.md#explicit) [ok](https://x.example/#y)",
		"`[in code](missing.md)`",
		"```",
		"[in a block](missing.md)",
		"```",
		"[gone](missing.md)",
		"[bad anchor](#nowhere)",
		"[bad anchor there](docs/b.md#not-a-heading)",
	}, "\n"))
	got := brokenLinks(t, dir, "README.md")
	want := []string{
		"README.md:7: missing.md: no such file",
		"README.md:8: #nowhere: no heading or anchor #nowhere",
		"README.md:9: docs/b.md#not-a-heading: no heading or anchor #not-a-heading",
	}
	if !slices.Equal(got, want) {
		t.Errorf("brokenLinks:\n got %q\nwant %q", got, want)
	}
}
