package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"regexp"
	"strconv"
	"strings"
)

// site is one thing a figure counts: where it is, what it is called, and
// its size (destinations, lines; 0 where there is none).
type site struct {
	Where string // file:line, or file for a statement block
	Name  string
	N     int
}

func at(fset *token.FileSet, p token.Pos) string {
	pos := fset.Position(p)
	return fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
}

// positionalScans lists every read of a row by position in f: each
// .Scan(...) call, with one destination per argument, and each
// pgx.ForEachRow call, with the elements of its []any{...} literal. A
// slice spread into Scan (dest...) counts its elements when it is a literal
// or a local variable assigned one.
func positionalScans(fset *token.FileSet, f *ast.File) []site {
	var out []site
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		switch {
		case sel.Sel.Name == "Scan":
			dests := len(call.Args)
			if call.Ellipsis.IsValid() && len(call.Args) == 1 {
				if n, ok := literalLen(call.Args[0]); ok {
					dests = n
				}
			}
			out = append(out, site{Where: at(fset, call.Pos()), Name: "Scan", N: dests})
		case sel.Sel.Name == "ForEachRow" && isIdent(sel.X, "pgx") && len(call.Args) >= 2:
			if n, ok := literalLen(call.Args[1]); ok {
				out = append(out, site{Where: at(fset, call.Pos()), Name: "ForEachRow", N: n})
			}
		}
		return true
	})
	return out
}

// literalLen is the number of elements of a composite literal, given as
// itself or as a local variable it was assigned to.
func literalLen(e ast.Expr) (int, bool) {
	if id, ok := e.(*ast.Ident); ok && id.Obj != nil {
		switch d := id.Obj.Decl.(type) {
		case *ast.AssignStmt:
			for i, l := range d.Lhs {
				if isIdent(l, id.Name) && i < len(d.Rhs) {
					e = d.Rhs[i]
				}
			}
		case *ast.ValueSpec:
			for i, name := range d.Names {
				if name.Name == id.Name && i < len(d.Values) {
					e = d.Values[i]
				}
			}
		}
	}
	if lit, ok := e.(*ast.CompositeLit); ok {
		return len(lit.Elts), true
	}
	return 0, false
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// typeAliases lists the `type X = Y` specs of f.
func typeAliases(fset *token.FileSet, f *ast.File) []site {
	var out []site
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, s := range gd.Specs {
			if ts := s.(*ast.TypeSpec); ts.Assign.IsValid() {
				out = append(out, site{Where: at(fset, ts.Pos()), Name: ts.Name.Name})
			}
		}
	}
	return out
}

// exportedSQL lists the exported package-level constants and variables of
// f whose names end in "SQL".
func exportedSQL(fset *token.FileSet, f *ast.File) []site {
	var out []site
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
			continue
		}
		for _, s := range gd.Specs {
			for _, name := range s.(*ast.ValueSpec).Names {
				if name.IsExported() && strings.HasSuffix(name.Name, "SQL") {
					out = append(out, site{Where: at(fset, name.Pos()), Name: name.Name})
				}
			}
		}
	}
	return out
}

// sqlWords are what makes a string look like SQL: a keyword as a word, or
// one of the other pieces anywhere.
var sqlWords = regexp.MustCompile(`\b(SELECT|FROM|WHERE|UPDATE|INSERT|DELETE|WITH|JOIN|CASE)\b|coalesce| AND |::`)

// looksLikeSQL says whether the text of a string literal reads as SQL.
func looksLikeSQL(s string) bool { return sqlWords.MatchString(s) }

// stringValue is the text of a string literal; ok is false for anything
// else.
func stringValue(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// sqlOperand says whether one operand of a + is SQL: a literal that looks
// like it, or a name ending in "SQL".
func sqlOperand(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return strings.HasSuffix(e.Name, "SQL")
	case *ast.SelectorExpr:
		return strings.HasSuffix(e.Sel.Name, "SQL")
	}
	s, ok := stringValue(e)
	return ok && looksLikeSQL(s)
}

// sqlJoins lists the places in f where SQL is joined with +: a chain
// a + b + ... (or s += ...) one of whose operands is sqlOperand, once per
// chain, at its start.
func sqlJoins(fset *token.FileSet, f *ast.File) []site {
	var out []site
	inChain := map[ast.Expr]bool{} // a + nested in one already seen
	ast.Inspect(f, func(n ast.Node) bool {
		var operands []ast.Expr
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.ADD || inChain[n] {
				return true
			}
			operands = flattenAdd(n, inChain)
		case *ast.AssignStmt:
			if n.Tok != token.ADD_ASSIGN || len(n.Lhs) != 1 || len(n.Rhs) != 1 {
				return true
			}
			operands = append([]ast.Expr{n.Lhs[0]}, flattenAdd(n.Rhs[0], inChain)...)
		default:
			return true
		}
		for _, o := range operands {
			if sqlOperand(o) {
				out = append(out, site{Where: at(fset, n.Pos()), Name: "+"})
				break
			}
		}
		return true
	})
	return out
}

// flattenAdd returns the operands of a chain of + (through parentheses),
// marking each + of it in seen.
func flattenAdd(e ast.Expr, seen map[ast.Expr]bool) []ast.Expr {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return flattenAdd(x.X, seen)
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			seen[x] = true
			return append(flattenAdd(x.X, seen), flattenAdd(x.Y, seen)...)
		}
	}
	return []ast.Expr{e}
}

// sqlStrings lists the string literals of f that look like SQL, each with
// its statement lines (sqlLines) and named by the constant or variable it
// is the value of, or else by the function it is in.
func sqlStrings(fset *token.FileSet, f *ast.File) []site {
	var out []site
	collect := func(root ast.Node, name string) {
		ast.Inspect(root, func(n ast.Node) bool {
			e, ok := n.(ast.Expr)
			if !ok {
				return true
			}
			if s, ok := stringValue(e); ok && looksLikeSQL(s) {
				out = append(out, site{Where: at(fset, e.Pos()), Name: name, N: sqlLines(s)})
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			collect(d, "a literal in "+d.Name.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, v := range vs.Values {
					name := vs.Names[min(i, len(vs.Names)-1)].Name
					collect(v, name)
				}
			}
		}
	}
	return out
}

// sqlLines counts the lines of SQL text that are neither blank nor only a
// comment.
func sqlLines(text string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "--") {
			n++
		}
	}
	return n
}

// statementBlocks lists the named blocks of a queries/*.sql file with
// their lengths (sqlLines), by the rule of outbox's parseBlocks: a block
// begins at a "-- name: NAME" line and ends at the first line after it
// that ends with ";" and is not a comment. A block without its ";" runs to
// the end of the file.
func statementBlocks(file, src string) []site {
	var out []site
	var body []string
	open := false
	finish := func() {
		out[len(out)-1].N = sqlLines(strings.Join(body, "\n"))
		open, body = false, nil
	}
	for i, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(t, "-- name:"); ok {
			if open {
				finish()
			}
			out = append(out, site{Where: fmt.Sprintf("%s:%d", file, i+1), Name: strings.TrimSpace(name)})
			open = true
			continue
		}
		if !open {
			continue
		}
		body = append(body, line)
		if strings.HasSuffix(t, ";") && !strings.HasPrefix(t, "--") {
			finish()
		}
	}
	if open {
		finish()
	}
	return out
}
