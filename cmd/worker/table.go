package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// cell is s as a cell of a CLI table (or a line of a command's report):
// every character that could change what the terminal shows rather than
// be shown is written as a \u escape (\U above U+FFFF, \x for a byte that
// is not UTF-8): C0 and C1 controls and DEL (a newline or tab would break
// the table, ESC starts terminal sequences), Unicode format characters
// (Cf: the bidirectional controls U+061C, U+200E, U+200F, U+202A-U+202E
// and U+2066-U+2069 that reorder what follows them, zero-width
// characters, U+FEFF...) and the line and paragraph separators. The
// strings come from producers, consumers and SQL: an event type holding
// U+202E must not print a table that reads otherwise than it is. Anything
// else, other non-ASCII text included, is kept.
func cell(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || escaped(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case escaped(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case escaped(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// escaped reports whether cell writes r as an escape.
func escaped(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
