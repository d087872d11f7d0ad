package sender

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// errorText describes err, which ended the attempt made under reqCtx (a
// child of parent), for Result.Error: "timeout after <Timeout>" when the
// Sender's own timeout fired, the context's error when parent ended,
// "response headers exceeded <n> bytes" when the consumer sent more than
// the limit, else the network error without its *url.Error wrapper (which
// quotes the URL).
func (s *Sender) errorText(parent, reqCtx context.Context, err error) string {
	switch {
	case parent.Err() != nil:
		return parent.Err().Error()
	case errors.Is(context.Cause(reqCtx), errTimeout):
		return timeoutText(s.timeout)
	case headerLimitHit(err):
		return "response headers exceeded " + strconv.FormatInt(s.maxHeader, 10) + " bytes"
	}
	for {
		var ue *url.Error
		if !errors.As(err, &ue) || ue.Err == nil {
			break
		}
		err = ue.Err
	}
	text := err.Error()
	switch {
	case strings.Contains(text, "remote error: tls: "):
		// The consumer ended the handshake with an alert: most often it
		// refused the client certificate (none, unknown CA, expired).
		text = "the consumer refused the TLS handshake (check the endpoint's client certificate): " + text
	case s.certAsked.Load() && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)):
		// With TLS 1.3 a consumer checks the client certificate after the
		// handshake: its refusal (an alert, then the connection closed)
		// may reach the request's write as a closed connection instead.
		text = "the consumer refused the TLS handshake (check the endpoint's client certificate): it closed the connection after asking for one: " + text
	}
	return s.scrub(text)
}

// headerLimitHit reports whether err is net/http's refusal of a response
// whose headers exceeded Transport.MaxResponseHeaderBytes. net/http has no
// sentinel for it, only this text ("net/http: server response headers
// exceeded 65536 bytes; aborted"), which never quotes the headers;
// TestHugeResponseHeaders holds it to that.
func headerLimitHit(err error) bool {
	return strings.Contains(err.Error(), "server response headers exceeded")
}

func timeoutText(d time.Duration) string {
	return "timeout after " + d.String()
}

// scrub removes the URL and its query, should an error quote them, replaces
// invalid UTF-8 and control characters (the text is stored in a database
// text column), and truncates the result to MaxErrorTextBytes.
func (s *Sender) scrub(text string) string {
	text = strings.ReplaceAll(text, s.url.String(), "[url]")
	if s.url.RawQuery != "" {
		text = strings.ReplaceAll(text, s.url.RawQuery, "[query]")
	}
	text = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(text, "\uFFFD"))
	return truncate(text)
}

// truncate cuts text to at most MaxErrorTextBytes on a rune boundary.
func truncate(text string) string {
	if len(text) <= MaxErrorTextBytes {
		return text
	}
	cut := MaxErrorTextBytes
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}
