package outbox

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestNamedNumbersArgumentsOnce(t *testing.T) {
	t.Parallel()
	n := mustNamed(`SELECT @b::int, @a, @b, '@not_one', x::text -- @nor_this
FROM t`)
	if want := "SELECT $1::int, $2, $1, '@not_one', x::text -- @nor_this\nFROM t"; n.sql != want {
		t.Fatalf("sql %q, want %q", n.sql, want)
	}
	args, err := n.args(pgx.NamedArgs{"a": 1, "b": 2, "unused": 3})
	if err != nil || len(args) != 2 || args[0] != 2 || args[1] != 1 {
		t.Fatalf("args %v, %v; want [2 1]", args, err)
	}
	if _, err := n.args(pgx.NamedArgs{"b": 2}); err == nil || !strings.Contains(err.Error(), "@a") {
		t.Fatalf("missing argument: %v, want an error naming @a", err)
	}
	// Every named argument of the worker's hot statements is numbered.
	for _, s := range []string{ClaimSQL, PlainClaimSQL, statements["record"].text, statements["record_fan"].text,
		statements["lock_lanes"].text, statements["promote"].text} {
		if n := mustNamed(s); nameRE.MatchString(n.sql) || len(n.names) == 0 {
			t.Errorf("%.40s…: left named arguments, or found none: %v", s, n.names)
		}
	}
}
