// Package doccheck holds the tests that keep the user documentation
// (README.md and docs/*.md) true to the repository: its links resolve, the
// environment variables it documents are the ones cmd/worker reads, every
// metric the code registers is documented, and it carries no issue
// numbers or commit hashes. The commands of `worker --help` are checked
// in cmd/worker (docs_test.go there), which can read its command table.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
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

// envReaders are the functions of cmd/worker whose first argument is the
// name of an environment variable they read: getenv itself (the function
// every reader is handed), os.Getenv and os.LookupEnv, and every method
// or function whose body passes its first parameter to one of them (found
// in the source, so a new reader is found without a change here).
func envReaders(files []*ast.File) map[string]bool {
	readers := map[string]bool{"getenv": true, "Getenv": true, "LookupEnv": true}
	for changed := true; changed; {
		changed = false
		for _, f := range files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil || readers[fn.Name.Name] || len(fn.Type.Params.List) == 0 {
					continue
				}
				first := fn.Type.Params.List[0]
				if len(first.Names) == 0 {
					continue
				}
				param := first.Names[0].Name
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					c, ok := n.(*ast.CallExpr)
					if ok && readers[calleeName(c)] && len(c.Args) > 0 {
						if id, ok := c.Args[0].(*ast.Ident); ok && id.Name == param {
							readers[fn.Name.Name] = true
							changed = true
						}
					}
					return true
				})
			}
		}
	}
	return readers
}

func calleeName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// readVariables are the environment variables the Go files of cmd/worker
// (tests aside) read: the string passed first to an env reader, as a
// literal or a constant (the function's own, else the package's).
func readVariables(t *testing.T, dir string) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "cmd", "worker", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	pkgConsts := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok {
				stringConsts(g, pkgConsts)
			}
		}
	}
	readers := envReaders(files)
	vars := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			local := map[string]string{}
			ast.Inspect(d, func(n ast.Node) bool {
				if g, ok := n.(*ast.GenDecl); ok && g != d {
					stringConsts(g, local)
				}
				return true
			})
			ast.Inspect(d, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok || !readers[calleeName(c)] || len(c.Args) == 0 {
					return true
				}
				s, ok := stringLit(c.Args[0])
				if id, isID := c.Args[0].(*ast.Ident); !ok && isID {
					if s, ok = local[id.Name]; !ok {
						s, ok = pkgConsts[id.Name]
					}
				}
				if ok && envName.MatchString(s) {
					vars[s] = true
				}
				return true
			})
		}
	}
	return vars
}

// stringConsts adds the string constants of g to m.
func stringConsts(g *ast.GenDecl, m map[string]string) {
	if g.Tok != token.CONST {
		return
	}
	for _, spec := range g.Specs {
		v := spec.(*ast.ValueSpec)
		for i, name := range v.Names {
			if i < len(v.Values) {
				if s, ok := stringLit(v.Values[i]); ok {
					m[name.Name] = s
				}
			}
		}
	}
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// documentedVariables are the first cells of the tables of
// docs/configuration.md that name a variable: `NAME`.
func documentedVariables(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range tableVariable.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

var tableVariable = regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]*)` \\|")

// Every environment variable cmd/worker reads is documented in
// docs/configuration.md (a table row of its own), and every variable
// documented there is read.
func TestConfigurationDocumentsEveryVariable(t *testing.T) {
	t.Parallel()
	dir := root(t)
	used := readVariables(t, dir)
	if len(used) < 20 || !used["DATABASE_URL"] || !used["WEBHOOK_CONSOLE_TOKEN_FILE"] {
		t.Fatalf("found only %d variables read by cmd/worker: the source scan is broken", len(used))
	}
	doc := documentedVariables(read(t, filepath.Join(dir, "docs", "configuration.md")))
	for v := range used {
		if !doc[v] {
			t.Errorf("cmd/worker reads %s, which docs/configuration.md does not document (a table row: | `%s` | default | …)", v, v)
		}
	}
	for v := range doc {
		if !used[v] {
			t.Errorf("docs/configuration.md documents %s, which cmd/worker does not read", v)
		}
	}
}

// The scan finds variables read through every kind of reader: a literal,
// a constant, a method that hands its parameter to getenv.
func TestReadVariablesFindsEveryReader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `package main

import "os"

type env struct{ getenv func(string) string }

func (e *env) int(name string, def int) int { _ = e.getenv(name); return def }
func (e *env) twice(name string) int       { return e.int(name, 0) }
func (e *env) fail(name string)             {}

const pkgKey = "F_PKG_CONST"

func other(e *env) { const key = "G_LOCAL_TOO"; _ = e.getenv(key); _ = e.getenv(pkgKey) }

func load(getenv func(string) string) {
	const key = "C_CONST"
	e := &env{getenv: getenv}
	_ = getenv("A_LITERAL")
	e.int("B_METHOD", 1)
	_ = e.getenv(key)
	e.twice("D_NESTED")
	_ = os.Getenv("E_OS")
	e.fail("NOT_READ")
}
`
	if err := os.MkdirAll(filepath.Join(dir, "cmd", "worker"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmd", "worker", "config.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := readVariables(t, dir)
	want := map[string]bool{"A_LITERAL": true, "B_METHOD": true, "C_CONST": true, "D_NESTED": true, "E_OS": true,
		"F_PKG_CONST": true, "G_LOCAL_TOO": true}
	if len(got) != len(want) {
		t.Errorf("read %v, want %v", got, want)
	}
	for v := range want {
		if !got[v] {
			t.Errorf("%s not found", v)
		}
	}
}

// metricNames are the metric names registered by the Go code (tests and
// the bench module aside): string literals "fluxora_webhook_…" that do not
// end in "_" (a prefix, not a metric).
func metricNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) && p != dir {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range metricLiteral.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	metricLiteral = regexp.MustCompile(`"(fluxora_webhook_[a-z0-9_]*[a-z0-9])"`)
	metricRow     = regexp.MustCompile("(?m)^\\| `(fluxora_webhook_[a-z0-9_]+)")
)

// Every metric the code registers has a row in docs/operations.md's
// metric tables, and every row names a metric the code registers.
func TestOperationsDocumentsEveryMetric(t *testing.T) {
	t.Parallel()
	dir := root(t)
	code := metricNames(t, dir)
	if len(code) < 30 {
		t.Fatalf("found only %d metric names in the code: the scan is broken", len(code))
	}
	doc := map[string]bool{}
	for _, m := range metricRow.FindAllStringSubmatch(read(t, filepath.Join(dir, "docs", "operations.md")), -1) {
		doc[m[1]] = true
	}
	for m := range code {
		if !doc[m] {
			t.Errorf("the code registers %s, which docs/operations.md's metric tables do not list", m)
		}
	}
	for m := range doc {
		if !code[m] {
			t.Errorf("docs/operations.md lists %s, which the code does not register", m)
		}
	}
}

// history finds what belongs in git and the changelog, not in the user
// documentation: "issue 12", and commit hashes (7 to 40 lower-case hex
// digits with at least one digit and one letter, a whole word: a uuid's
// groups are joined by - and so are not one).
func history(text string) []string {
	var out []string
	for i, l := range strings.Split(text, "\n") {
		for _, m := range issueRef.FindAllString(l, -1) {
			out = append(out, strconv.Itoa(i+1)+": "+m)
		}
		for _, w := range word.FindAllString(l, -1) {
			if hexHash.MatchString(w) && strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdef") {
				out = append(out, strconv.Itoa(i+1)+": "+w)
			}
		}
	}
	return out
}

var (
	issueRef = regexp.MustCompile(`(?i)\bissues?\s+#?\d+`)
	word     = regexp.MustCompile(`[0-9A-Za-z_-]+`)
	hexHash  = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
)

// README.md and docs/*.md name no issue number and no commit hash.
func TestDocsCarryNoIssueNumbersOrHashes(t *testing.T) {
	t.Parallel()
	dir := root(t)
	for _, f := range docFiles(t, dir) {
		for _, h := range history(read(t, filepath.Join(dir, f))) {
			t.Errorf("%s:%s: an issue number or commit hash; history belongs in git and CHANGELOG.md", f, h)
		}
	}
}

func TestHistoryIsFound(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		"Fixed in issue 22 and Issues #7.",
		"Measured against 5c97906, and e2c18c2490fd4f.",
		"A uuid 1b4e28ba-2fa1-41d2-883f-0016d3cca427 and a key 20261206-3fa9c1 pass,",
		"so do 1000000, deadbeef, fluxora_tmpl_0a1b2c3d4e5f and sha256 of 64 digits " + strings.Repeat("ab12", 16) + ".",
	}, "\n")
	got := history(text)
	want := []string{"1: issue 22", "1: Issues #7", "2: 5c97906", "2: e2c18c2490fd4f"}
	if !slices.Equal(got, want) {
		t.Errorf("history:\n got %q\nwant %q", got, want)
	}
}

// Each file of docs/ answers one task in at most 600 lines.
func TestDocsAreShort(t *testing.T) {
	t.Parallel()
	dir := root(t)
	for _, f := range docFiles(t, dir)[1:] {
		if n := strings.Count(read(t, filepath.Join(dir, f)), "\n"); n > 600 {
			t.Errorf("%s has %d lines; at most 600: split it by task", f, n)
		}
	}
}
