package outbox

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// queryFiles holds the store's statements, one file per subject. Each
// statement is a block that begins with a line "-- name: NAME", goes on
// with the comment lines that say what it does, and ends with ";". Its
// parameters are psql's variables (:'limit'), so that a block runs in psql
// as written once they are set (\set limit 10); the store sends them as
// pgx's named arguments (@limit).
//
//go:embed queries/*.sql
var queryFiles embed.FS

// parsed is a statement as its file holds it.
type parsed struct {
	file, name string
	// doc is the block's comment, without its "--"; text the statement,
	// as sent.
	doc, text string
}

// psqlVar is a parameter as the files write it: psql's variable,
// interpolated as a literal (:'name').
var psqlVar = regexp.MustCompile(`:'([A-Za-z_][A-Za-z0-9_]*)'`)

// named is p's text with its parameters as pgx's named arguments.
func (p parsed) named() string { return psqlVar.ReplaceAllString(p.text, "@$1") }

// statements are the blocks of queryFiles by name.
var statements = mustParseFiles(queryFiles)

// requested records the names the package asked for (statement), so that a
// test can tell a block no code runs.
var requested sync.Map

// statement returns the named statement, rewritten for its arguments; it
// panics on a name no file holds, which is a mistake of this package: every
// test fails at its start.
func statement(name string) named {
	p, ok := statements[name]
	if !ok {
		panic(fmt.Sprintf("outbox: no statement named %q in queries/", name))
	}
	requested.Store(name, true)
	return mustNamed(p.named())
}

// rawStatement returns the named statement with its parameters as pgx's
// named arguments (@name), for a statement run with pgx.NamedArgs.
func rawStatement(name string) string {
	p, ok := statements[name]
	if !ok {
		panic(fmt.Sprintf("outbox: no statement named %q in queries/", name))
	}
	requested.Store(name, true)
	return p.named()
}

// mustParseFiles reads every block of the files; it panics on a file it
// cannot read or a block it cannot take (see parseBlocks).
func mustParseFiles(fsys fs.FS) map[string]parsed {
	names, err := fs.Glob(fsys, "queries/*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	out := map[string]parsed{}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic(err)
		}
		blocks, err := parseBlocks(path.Base(n), string(b))
		if err != nil {
			panic(err)
		}
		for _, p := range blocks {
			if q, dup := out[p.name]; dup {
				panic(fmt.Sprintf("outbox: statement %q is in %s and %s", p.name, q.file, p.file))
			}
			out[p.name] = p
		}
	}
	return out
}

// parseBlocks splits a file into its statements. Lines before the first
// "-- name:" line are the file's own comment. A block's comment lines
// right after its name are its doc; its text the lines after them up to
// the one that ends with ";" (which is dropped); anything but
// comments and blank lines after it, before the next block, is an error,
// as is a block without an end.
func parseBlocks(file, src string) ([]parsed, error) {
	var out []parsed
	var cur *parsed
	var body []string
	ended := false
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(trimmed, "-- name:"); ok {
			if cur != nil && !ended {
				return nil, fmt.Errorf("outbox: %s:%d: statement %q has no closing ;", file, i+1, cur.name)
			}
			name = strings.TrimSpace(name)
			if name == "" || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("outbox: %s:%d: a block needs one name after -- name:", file, i+1)
			}
			out = append(out, parsed{file: file, name: name})
			cur, body, ended = &out[len(out)-1], nil, false
			continue
		}
		if cur == nil || ended {
			if trimmed != "" && !strings.HasPrefix(trimmed, "--") {
				return nil, fmt.Errorf("outbox: %s:%d: text outside a statement", file, i+1)
			}
			continue
		}
		if len(body) == 0 && strings.HasPrefix(trimmed, "--") {
			cur.doc += strings.TrimSpace(strings.TrimPrefix(trimmed, "--")) + "\n"
			continue
		}
		if strings.HasSuffix(trimmed, ";") && !strings.HasPrefix(trimmed, "--") {
			body = append(body, strings.TrimRight(strings.TrimSuffix(strings.TrimRight(line, " \t"), ";"), " \t"))
			cur.text, ended = strings.Join(body, "\n"), true
			continue
		}
		body = append(body, line)
	}
	if cur != nil && !ended {
		return nil, fmt.Errorf("outbox: %s: statement %q has no closing ;", file, cur.name)
	}
	return out, nil
}
