package main

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

func TestCellEscapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"invoice.paid", "invoice.paid"},
		{"é ünïcode 日本 ✓", "é ünïcode 日本 ✓"},
		{`back\slash`, `back\slash`},
		{"a\nb\tc\rd", `a\u000ab\u0009c\u000dd`},
		{"\x00\x1b[31mred\x7f", `\u0000\u001b[31mred\u007f`},
		{"c1\u0085\u009b", `c1\u0085\u009b`},
		{"evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"zero\u200bwidth\u200d\ufeff\u00ad", `zero\u200bwidth\u200d\ufeff\u00ad`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		{"tag\U000e0001", `tag\U000e0001`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{"\uFFFD kept", "\uFFFD kept"},
	} {
		if got := cell(tc.in); got != tc.want {
			t.Errorf("cell(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// worker status, endpoints list and dlq list print texts written by SQL
// (an event type holding a right-to-left override, a reason and an error
// holding newlines and ESC) as escapes: no raw control or bidirectional
// character reaches the terminal, and each row stays one line.
func TestTablesEscapeControls(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO webhook_endpoints (name, url, secret, event_types, enabled, disabled_reason, last_error, last_error_at)
			VALUES ('rlo', 'https://a.example.com/h', 'whsec_x', '{"invoice` + "\u202e" + `diap"}', false,
			        E'gone\n\u202eevil', E'boom\n\u001b[31mred', now())`,
		`INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_error, endpoint_id)
			SELECT gen_random_uuid(), E'inv\u202eoice.paid', '{}', 3, E'http 500\n\u2066forged\u2069', id FROM webhook_endpoints`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args  []string
		lines int // header and rows
		want  []string
	}{
		{[]string{"status", "--endpoint", "rlo"}, 2, []string{`disabled: gone\u000a\u202eevil`, `boom\u000a\u001b[31mred`}},
		{[]string{"endpoints", "list"}, 2, []string{`invoice\u202ediap`, `gone\u000a\u202eevil`}},
		{[]string{"dlq", "list"}, 2, []string{`inv\u202eoice.paid`, `http 500\u000a\u2066forged\u2069`}},
	} {
		code, out, errs := ops(t, db, tc.args...)
		if code != exitOK {
			t.Fatalf("%q: exit %d: %s", tc.args, code, errs)
		}
		if strings.ContainsAny(out, "\u202e\u2066\u2069\x1b") || strings.Count(out, "\n") != tc.lines {
			t.Errorf("%q printed a raw control or bidirectional character, or a broken row:\n%q", tc.args, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: no %s in\n%s", tc.args, w, out)
			}
		}
	}
}
