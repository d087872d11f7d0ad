package outbox

import (
	"slices"
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
	for _, n := range append(slices.Clone(claimSteps), statement("record"), statement("record_fan"), statement("lock_lanes"), statement("promote")) {
		if nameRE.MatchString(n.sql) || len(n.names) == 0 {
			t.Errorf("%.40s…: left named arguments, or found none: %v", n.sql, n.names)
		}
	}
}
