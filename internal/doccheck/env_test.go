package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

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
