// Package eventheaders holds the rules of an event's extra request headers
// (webhook_outbox.headers): Parse reads the column's JSON text, Check
// applies the rules the SQL function webhook_headers_problem applies at
// insert, with the same texts. The sender checks them again before each
// request, and the producer kit before its round trip.
package eventheaders

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of an event's extra headers (webhook_outbox.headers).
const (
	// Max is the most extra headers of one event.
	Max = 16
	// MaxBytes is the most bytes of their names and values together
	// (8 KiB).
	MaxBytes = 8 << 10
)

// Field is one extra request header of an event: its name, kept as
// given (it is sent in that case), and its value.
type Field struct {
	Name, Value string
}

// errNotObject is Parse' error for text that is not a JSON object.
var errNotObject = errors.New("must be a JSON object of string values")

// Parse decodes the text of webhook_outbox.headers, a JSON object of
// string values, into fields in the order of the text. Empty text (SQL
// NULL) is no headers. Its errors are those of the SQL function
// webhook_headers_problem: "must be a JSON object of string values", or
// `"name": the value must be a string without CR, LF or control characters`
// for the first value that is not a string. It does not apply the rules of
// Check (the sender does, before each request).
func Parse(text []byte) ([]Field, error) {
	if len(text) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
	}
	var out []Field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errNotObject
		}
		name, _ := tok.(string) // an object's keys are strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errNotObject
		}
		var value string
		if raw[0] != '"' || json.Unmarshal(raw, &value) != nil {
			return nil, errors.New(valueProblem(name))
		}
		out = append(out, Field{Name: name, Value: value})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotObject // trailing data
	}
	return out, nil
}

// Check returns why h may not be sent, naming the header, or nil.
// The rules, and the error texts, are those of the SQL function
// webhook_headers_problem, which checks webhook_outbox.headers at insert
// (sql/migrations/007_event_headers.sql, redefined by
// 020_header_name_fold.sql): at most Max headers; then,
// in order, each name an HTTP token and not one the worker or the transport
// owns (case-insensitively and with "_" read as "-": Content-Type,
// Content-Length, Host, User-Agent, x-fluxora-*, webhook-*, and the
// hop-by-hop Connection, Keep-Alive, Proxy-Connection, Proxy-Authenticate,
// Proxy-Authorization, TE, Trailer, Transfer-Encoding, Upgrade), each value valid UTF-8 without control
// characters, no name given twice in another case; and at most
// MaxBytes of names and values. The texts never quote a value.
func Check(h []Field) error {
	if len(h) > Max {
		return errors.New("at most " + strconv.Itoa(Max) + " headers, got " + strconv.Itoa(len(h)))
	}
	total := 0
	for i, f := range h {
		if msg := headerProblem(h[:i], f); msg != "" {
			return errors.New(msg)
		}
		total += len(f.Name) + len(f.Value)
	}
	if total > MaxBytes {
		return errors.New("at most 8 KiB (names and values), got " + strconv.Itoa(total) + " bytes")
	}
	return nil
}

// headerProblem says why f may not follow before, or "".
func headerProblem(before []Field, f Field) string {
	if !isToken(f.Name) {
		return quote(f.Name) + ": a header name must be an HTTP token"
	}
	if why := reservedHeader(foldName(f.Name)); why != "" {
		return quote(f.Name) + " may not be set: " + why
	}
	if !validValue(f.Value) {
		return valueProblem(f.Name)
	}
	for _, b := range before {
		if strings.EqualFold(b.Name, f.Name) {
			return quote(b.Name) + " and " + quote(f.Name) + " are the same header (names are case-insensitive)"
		}
	}
	return ""
}

func valueProblem(name string) string {
	return quote(name) + ": the value must be a string without CR, LF or control characters"
}

// foldName is name as the servers that read "_" as "-" see it (CGI and
// WSGI turn both into "_" in HTTP_* variables, some proxies rewrite one
// into the other), in lower case: "Webhook_Signature" would reach such a
// consumer as a second webhook-signature, so the reserved names are judged
// on this form. The name is still sent as given.
func foldName(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// reservedHeader says why the folded name lower (foldName) is not the
// producer's to set, or "".
func reservedHeader(lower string) string {
	switch {
	case lower == "content-type", lower == "content-length", lower == "host", lower == "user-agent":
		return "the worker sets it"
	case strings.HasPrefix(lower, "x-fluxora-"):
		return "x-fluxora-* headers are the worker's"
	case strings.HasPrefix(lower, "webhook-"):
		return "webhook-* headers are the worker's"
	}
	switch lower {
	case "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
		"te", "trailer", "transfer-encoding", "upgrade":
		return "it is a hop-by-hop header"
	}
	return ""
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validValue reports whether v is valid UTF-8 without control characters
// (C0, DEL, C1).
func validValue(v string) bool {
	if !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// quote writes s as a JSON string the way PostgreSQL's to_json does, so that
// the texts match the database's byte for byte: ", \ and the C0 controls
// escaped, everything else as it is.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[c>>4])
				b.WriteByte("0123456789abcdef"[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
