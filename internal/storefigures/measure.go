package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// storePackage is the directory of package outbox, below the module root.
const storePackage = "outbox"

// report holds what the figures are made of.
type report struct {
	scans      []site // positional scans in outbox
	aliases    []site // type aliases in the module
	outboxSQL  []site // exported …SQL names in outbox
	moduleSQL  []site // the same in the module, named dir.Name
	joins      []site // SQL joined with + in outbox
	blocks     []site // statements of outbox/queries
	goStrings  []site // SQL string literals in outbox's Go
	filesCount int    // Go files read
}

// measure reads the main module at root.
func measure(root string) (report, error) {
	var r report
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(p, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		dir := path.Dir(rel)
		switch {
		case strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go"):
			return r.addGo(fset, p, rel)
		case dir == storePackage+"/queries" && strings.HasSuffix(rel, ".sql"):
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			r.blocks = append(r.blocks, statementBlocks(rel, string(src))...)
		}
		return nil
	})
	return r, err
}

// skipDir says whether a directory is outside the main module's sources:
// a module of its own, testdata, or hidden.
func skipDir(p, name string) bool {
	if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(p, "go.mod"))
	return err == nil
}

// addGo counts one non-test Go file, named rel.
func (r *report) addGo(fset *token.FileSet, p, rel string) error {
	src, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	f, err := parser.ParseFile(fset, rel, src, 0) // with object resolution: literalLen follows local names
	if err != nil {
		return err
	}
	r.filesCount++
	r.aliases = append(r.aliases, typeAliases(fset, f)...)
	for _, s := range exportedSQL(fset, f) {
		s.Name = path.Dir(rel) + "." + s.Name
		r.moduleSQL = append(r.moduleSQL, s)
	}
	if path.Dir(rel) != storePackage || f.Name.Name != storePackage {
		return nil
	}
	r.scans = append(r.scans, positionalScans(fset, f)...)
	r.outboxSQL = append(r.outboxSQL, exportedSQL(fset, f)...)
	r.joins = append(r.joins, sqlJoins(fset, f)...)
	r.goStrings = append(r.goStrings, sqlStrings(fset, f)...)
	return nil
}

// lines are the figures, one a line: "figure: value (where)".
func (r report) lines() []string {
	widest := largest(r.scans)
	longestBlock, longestGo := largest(r.blocks), largest(r.goStrings)
	longest := largest(append(append([]site{}, r.blocks...), r.goStrings...))
	return []string{
		fmt.Sprintf("widest positional scan in outbox: %d destinations (%s)", n(widest), list(widest, whereAndName)),
		fmt.Sprintf("type aliases outside tests: %d (%s)", len(r.aliases), list(r.aliases, fileAndName)),
		fmt.Sprintf("exported SQL constants/vars in outbox: %d (%s)", len(r.outboxSQL), list(r.outboxSQL, nameOnly)),
		fmt.Sprintf("exported SQL constants/vars in the module: %d (%s)", len(r.moduleSQL), list(r.moduleSQL, nameOnly)),
		fmt.Sprintf("SQL joined with + in outbox: %d (%s)", len(r.joins), list(r.joins, whereOnly)),
		fmt.Sprintf("longest statement: %d lines (%s)", n(longest), list(longest, nameAndWhere)),
		fmt.Sprintf("longest statement in outbox/queries: %d lines (%s)", n(longestBlock), list(longestBlock, nameAndWhere)),
		fmt.Sprintf("longest SQL string in outbox's Go: %d lines (%s)", n(longestGo), list(longestGo, nameAndWhere)),
		fmt.Sprintf("Go files read: %d (main module, tests left out)", r.filesCount),
	}
}

// largest is every site of the greatest N (several on a tie).
func largest(sites []site) []site {
	var out []site
	for _, s := range sites {
		switch {
		case len(out) == 0 || s.N > out[0].N:
			out = []site{s}
		case s.N == out[0].N:
			out = append(out, s)
		}
	}
	return out
}

func n(sites []site) int {
	if len(sites) == 0 {
		return 0
	}
	return sites[0].N
}

func list(sites []site, show func(site) string) string {
	if len(sites) == 0 {
		return "none"
	}
	parts := make([]string, len(sites))
	for i, s := range sites {
		parts[i] = show(s)
	}
	return strings.Join(parts, ", ")
}

func whereOnly(s site) string    { return s.Where }
func nameOnly(s site) string     { return s.Name }
func whereAndName(s site) string { return s.Where + " " + s.Name }
func nameAndWhere(s site) string { return s.Name + " at " + s.Where }

// fileAndName is file:Name, the file without its line.
func fileAndName(s site) string {
	file, _, _ := strings.Cut(s.Where, ":")
	return file + ":" + s.Name
}
