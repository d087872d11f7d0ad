package outbox

import (
	"strings"
	"testing"
)

func TestParseBlocks(t *testing.T) {
	t.Parallel()
	got, err := parseBlocks("x.sql", `-- The file's comment.

-- name: one
-- What one does.
SELECT 1
FROM t;

-- name: two
SELECT ';' AS semi;
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "one" || got[1].name != "two" {
		t.Fatalf("blocks = %+v", got)
	}
	if want := "SELECT 1\nFROM t"; got[0].text != want || got[0].doc != "What one does.\n" {
		t.Errorf("one = %q (doc %q), want %q", got[0].text, got[0].doc, want)
	}
	if want := "SELECT ';' AS semi"; got[1].text != want {
		t.Errorf("two = %q, want %q", got[1].text, want)
	}
	for _, bad := range []struct{ src, says string }{
		{"-- name: a\nSELECT 1\n-- name: b\nSELECT 2;", `"a" has no closing ;`},
		{"-- name: a\nSELECT 1", `"a" has no closing ;`},
		{"SELECT 1;", "x.sql:1: text outside a statement"},
		{"-- name: a\nSELECT 1;\nSELECT 2;", "x.sql:3: text outside a statement"},
		{"-- name:\nSELECT 1;", "one name"},
	} {
		if _, err := parseBlocks("x.sql", bad.src); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("parseBlocks(%q) = %v, want an error saying %q", bad.src, err, bad.says)
		}
	}
}

// TestEveryStatementIsRun fails on a block of queries/ no code of the
// package asks for: a statement left behind when its caller went.
func TestEveryStatementIsRun(t *testing.T) {
	t.Parallel()
	for name, p := range statements {
		if _, ok := requested.Load(name); !ok {
			t.Errorf("%s: statement %q is not run by the package", p.file, name)
		}
	}
}
