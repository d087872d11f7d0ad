package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// parse reads a fixture as the file fixture.go.
func parse(t *testing.T, src string) (*token.FileSet, *ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "fixture.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fset, f
}

func sizes(sites []site) []int {
	out := []int{}
	for _, s := range sites {
		out = append(out, s.N)
	}
	return out
}

func names(sites []site) []string {
	out := []string{}
	for _, s := range sites {
		out = append(out, s.Name)
	}
	return out
}

func wheres(sites []site) []string {
	out := []string{}
	for _, s := range sites {
		out = append(out, s.Where)
	}
	return out
}

func TestPositionalScans(t *testing.T) {
	fset, f := parse(t, `package p

func read() {
	row.Scan(&a, &b, &c)
	pgx.ForEachRow(rows, []any{&a, &b, &c, &d, &e, &f, &g, &h, &i}, func() error { return nil })
	dest := []any{&a, &b, &c, &d}
	rows.Scan(dest...)
	other.ForEachRow(rows, []any{&a, &b, &c, &d, &e, &f, &g, &h, &i, &j}, nil) // not pgx's
	pgx.ForEachRow(rows, dests, nil) // not a literal: not counted
}
`)
	got := positionalScans(fset, f)
	if want := []int{3, 9, 4}; !reflect.DeepEqual(sizes(got), want) {
		t.Errorf("destinations %v, want %v", sizes(got), want)
	}
	if w := largest(got); len(w) != 1 || w[0].N != 9 || w[0].Where != "fixture.go:5" {
		t.Errorf("widest %+v, want 9 at fixture.go:5", w)
	}
}

func TestTypeAliases(t *testing.T) {
	fset, f := parse(t, `package p

type A = int
type B int
type (
	C = string
	D struct{}
	E[T any] = []T
)
`)
	if got, want := names(typeAliases(fset, f)), []string{"A", "C", "E"}; !reflect.DeepEqual(got, want) {
		t.Errorf("aliases %v, want %v", got, want)
	}
}

func TestExportedSQL(t *testing.T) {
	fset, f := parse(t, `package p

const FooSQL = "SELECT 1"
const barSQL = "SELECT 2"
var BazSQL, Qux = "SELECT 3", 4
const SQLish = 5
const (
	ASQL = iota
	BSQL
)
func F() { const LocalSQL = "SELECT 4"; _ = LocalSQL }
`)
	if got, want := names(exportedSQL(fset, f)), []string{"FooSQL", "BazSQL", "ASQL", "BSQL"}; !reflect.DeepEqual(got, want) {
		t.Errorf("exported SQL %v, want %v", got, want)
	}
}

func TestSQLJoins(t *testing.T) {
	fset, f := parse(t, `package p

const cols = "a, b"
const one = "SELECT " + cols + " FROM t" + " WHERE a = 1"
const two = prefix + fooSQL
const three = "UPPERCASE " + name
const four = "hello " + name
var five = ("SELECT 1" + x)

func g() {
	q := base
	q += " AND b = 2"
	n := 1 + 2
	s := x.LimitSQL + "x"
	t := "a::int" + y
	_ = "TRUNCATE t"
}
`)
	if got, want := wheres(sqlJoins(fset, f)), []string{"fixture.go:4", "fixture.go:5", "fixture.go:8", "fixture.go:12", "fixture.go:14", "fixture.go:15"}; !reflect.DeepEqual(got, want) {
		t.Errorf("joins at %v, want %v", got, want)
	}
}

func TestSQLStrings(t *testing.T) {
	fset, f := parse(t, "package p\n\nconst claimSQL = `-- the claim\nSELECT a,\n\n  b\nFROM t\nWHERE x`\n\n"+
		"const greeting = `hello`\n\nfunc h() { run(\"DELETE FROM t\") }\n")
	got := sqlStrings(fset, f)
	if want := []string{"claimSQL", "a literal in h"}; !reflect.DeepEqual(names(got), want) {
		t.Errorf("names %v, want %v", names(got), want)
	}
	if want := []int{4, 1}; !reflect.DeepEqual(sizes(got), want) {
		t.Errorf("lines %v, want %v", sizes(got), want)
	}
}

func TestStatementBlocks(t *testing.T) {
	src := `-- The file's comment.

-- name: short
-- What it does;
SELECT 1;

-- name: longer
-- What it does,
-- in two lines.
SELECT a,

  b -- trailing comment
FROM t
WHERE x = @x;
-- after the block
`
	got := statementBlocks("q.sql", src)
	if want := []string{"short", "longer"}; !reflect.DeepEqual(names(got), want) {
		t.Errorf("names %v, want %v", names(got), want)
	}
	if want := []int{1, 4}; !reflect.DeepEqual(sizes(got), want) {
		t.Errorf("lines %v, want %v", sizes(got), want)
	}
	if want := []string{"q.sql:3", "q.sql:7"}; !reflect.DeepEqual(wheres(got), want) {
		t.Errorf("at %v, want %v", wheres(got), want)
	}
}

// measure reads the main module only: not a module of its own below it,
// not testdata, not tests; outbox's figures come from package outbox.
func TestMeasure(t *testing.T) {
	root := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module m\n")
	write("outbox/store.go", "package outbox\n\nconst ListSQL = `SELECT a\nFROM t`\nconst q = ListSQL + ` WHERE a`\n\nfunc f() { row.Scan(&a, &b) }\n")
	write("outbox/store_test.go", "package outbox\n\nfunc g() { row.Scan(&a, &b, &c, &d, &e) }\n")
	write("outbox/queries/list.sql", "-- name: list\nSELECT a,\n  b,\n  c\nFROM t;\n")
	write("outbox/insert/insert.go", "package insert\n\nconst EventSQL = `INSERT INTO t`\n")
	write("other/types.go", "package other\n\ntype A = int\n")
	write("other/testdata/x.go", "package x\n\ntype B = int\n")
	write("bench/go.mod", "module bench\n")
	write("bench/b.go", "package bench\n\ntype C = int\nconst BenchSQL = `SELECT 1`\n")
	r, err := measure(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"widest positional scan in outbox: 2 destinations (outbox/store.go:7 Scan)",
		"type aliases outside tests: 1 (other/types.go:A)",
		"exported SQL constants/vars in outbox: 1 (ListSQL)",
		"exported SQL constants/vars in the module: 2 (outbox/insert.EventSQL, outbox.ListSQL)",
		"SQL joined with + in outbox: 1 (outbox/store.go:5)",
		"longest statement: 4 lines (list at outbox/queries/list.sql:1)",
		"longest statement in outbox/queries: 4 lines (list at outbox/queries/list.sql:1)",
		"longest SQL string in outbox's Go: 2 lines (ListSQL at outbox/store.go:3)",
		"Go files read: 3 (main module, tests left out)",
	}
	if got := r.lines(); !reflect.DeepEqual(got, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
