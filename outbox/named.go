package outbox

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
)

// named is a statement with named arguments (@name) rewritten once into
// PostgreSQL's $n placeholders, with the names in placeholder order. pgx
// rewrites a statement passed with pgx.NamedArgs on every call, which for
// the claim's long text is a cost paid, and garbage made, on every claim
// of a drain.
type named struct {
	sql   string
	names []string
}

// nameRE finds the candidates for named arguments; pgx's own lexer then
// decides which are (it skips string literals, comments and casts).
var nameRE = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)

// mustNamed rewrites sql; it panics on a statement pgx cannot rewrite,
// which is a constant of this package: every test that runs it fails.
func mustNamed(sql string) named {
	probe := pgx.NamedArgs{}
	for _, m := range nameRE.FindAllStringSubmatch(sql, -1) {
		probe[m[1]] = m[1]
	}
	out, vals, err := probe.RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		panic(fmt.Sprintf("outbox: rewrite named arguments: %v", err))
	}
	n := named{sql: out, names: make([]string, len(vals))}
	for i, v := range vals {
		name, ok := v.(string)
		if !ok {
			panic(fmt.Sprintf("outbox: named argument %d of a statement not found", i+1))
		}
		n.names[i] = name
	}
	return n
}

// args orders a's values as n's placeholders; every name must be in a.
func (n named) args(a pgx.NamedArgs) ([]any, error) {
	out := make([]any, len(n.names))
	for i, name := range n.names {
		v, ok := a[name]
		if !ok {
			return nil, fmt.Errorf("statement argument @%s missing", name)
		}
		out[i] = v
	}
	return out, nil
}
