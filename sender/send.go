package sender

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fluxora/webhook-worker/eventheaders"
)

// maxHeaderValueBytes is the longest DeliveryID or EventType Send accepts.
const maxHeaderValueBytes = 255

// userAgent is the User-Agent of every request.
const userAgent = "fluxora-webhook-worker"

// errTimeout is the cause of the per-Send timeout, to tell it apart from the
// caller's context ending.
var errTimeout = errors.New("sender: timeout")

// Request is one delivery attempt of an outbox row.
type Request struct {
	// DeliveryID is the delivery's uuid text, sent as x-fluxora-delivery-id.
	DeliveryID string
	// EventType is sent as x-fluxora-event.
	EventType string
	// Attempt is 1 for the first attempt, sent as x-fluxora-attempt.
	Attempt int
	// Payload is the raw JSON body, sent byte for byte. Send does not
	// modify it.
	Payload []byte
	// Endpoint is the endpoint's name, sent as x-fluxora-endpoint when not
	// empty.
	Endpoint string
	// Headers are the event's extra request headers (webhook_outbox.headers,
	// see eventheaders.Parse), sent after the worker's own, each name in the case
	// given; nil for none. They never replace a header of the worker's: a
	// Request whose Headers eventheaders.Check refuses is Permanent, with the
	// reason naming the header, and nothing is sent.
	Headers []eventheaders.Field
	// OrderingKey, when not empty, is the event's ordering key, sent as
	// webhook-ordering-key and x-fluxora-ordering-key, and Sequence its
	// place among the key's deliveries to this endpoint (1, 2, 3, …), sent
	// as webhook-sequence and x-fluxora-sequence: a consumer that sees a
	// number skipped knows a delivery was dead-lettered in between.
	OrderingKey string
	Sequence    int64
	// Traceparent, when not empty, is the W3C traceparent of the attempt's
	// span (PerEndpoint makes it when it has a tracer): it is sent in place
	// of a traceparent among Headers (under that header's name), or as
	// Traceparent when they have none. Empty: Headers go out as they are.
	Traceparent string
}

// Result is the outcome of one Send.
type Result struct {
	// Outcome is Delivered, Retryable or Permanent.
	Outcome Outcome
	// Status is the HTTP status, 0 when no response arrived.
	Status int
	// Error is a short reason when not delivered, such as "http 503",
	// "timeout after 10s", "redirect 302 not followed", "response headers
	// exceeded 65536 bytes" or the network error. It never contains the URL's query or credentials, the secret
	// or the payload, and is at most MaxErrorTextBytes of valid UTF-8
	// without control characters. Empty when delivered.
	Error string
	// RetryAfter is the response's Retry-After for status 429 and 503
	// (see ParseRetryAfter), else 0.
	RetryAfter time.Duration
	// Duration is the time the attempt took, on the monotonic clock.
	Duration time.Duration
}

// Send makes one delivery attempt. It never panics. A DeliveryID or
// EventType that is longer than 255 bytes, not valid UTF-8, or contains a
// control character (CR, LF, NUL, tab...) is Permanent and nothing is sent;
// so are Headers that eventheaders.Check refuses.
// The response body is read up to MaxResponseBytes; an error while reading
// it makes the attempt Retryable even after a 2xx status, since the consumer
// deduplicates on x-fluxora-delivery-id. When ctx ends first the attempt is
// Retryable.
func (s *Sender) Send(ctx context.Context, r Request) (res Result) {
	start := time.Now()
	defer func() {
		if recover() != nil { // e.g. from a Transport override; the value may hold anything
			res = Result{Outcome: Retryable, Error: "internal error: panic during send"}
		}
		res.Duration = time.Since(start)
	}()
	if msg := checkRequest(r); msg != "" {
		return Result{Outcome: Permanent, Error: s.scrub(msg)} // a header's name may hold anything
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if s.literal != "" {
		if err := s.control("tcp", s.literal, nil); err != nil {
			return Result{Outcome: Permanent, Error: s.scrub(err.Error())} // the egress guard, behind a proxy
		}
	}
	reqCtx, cancel := context.WithTimeoutCause(ctx, s.timeout, errTimeout)
	defer cancel()
	resp, err := s.transport.RoundTrip(s.newRequest(reqCtx, r))
	if err != nil {
		outcome := Retryable
		var p interface{ Permanent() bool }
		if errors.As(err, &p) && p.Permanent() {
			outcome = Permanent // e.g. the egress guard refused the address
		}
		return Result{Outcome: outcome, Error: s.errorText(ctx, reqCtx, err)}
	}
	return s.readResponse(ctx, reqCtx, resp)
}

// checkRequest returns why r cannot be sent, or "".
func checkRequest(r Request) string {
	const rule = ": must be at most 255 bytes of UTF-8 without control characters"
	switch {
	case !validHeaderValue(r.DeliveryID):
		return "invalid DeliveryID" + rule
	case !validHeaderValue(r.EventType):
		return "invalid EventType" + rule
	case !validHeaderValue(r.Endpoint):
		return "invalid Endpoint" + rule
	case !validHeaderValue(r.OrderingKey):
		return "invalid OrderingKey" + rule
	}
	if err := eventheaders.Check(r.Headers); err != nil {
		return "invalid Headers: " + err.Error()
	}
	return ""
}

func validHeaderValue(v string) bool {
	if len(v) > maxHeaderValueBytes || !utf8.ValidString(v) {
		return false
	}
	for _, c := range v {
		if unicode.IsControl(c) {
			return false
		}
	}
	return true
}

// Signatures are a request's signature values: what Header sends as
// x-fluxora-signature and webhook-signature.
type Signatures struct {
	// Fluxora is the x-fluxora-signature (Sign).
	Fluxora string
	// Standard is the webhook-signature (SignStandard), two of them
	// separated by a space while a previous secret is in its grace period.
	Standard string
}

// Header returns the headers of the request Send makes for r at ts (Unix
// seconds) with the signature headers of families h (0: both, as in
// Config.Headers) carrying sig: Content-Type, User-Agent, the
// x-fluxora-* headers, the Standard Webhooks ones, the ordering headers
// when r has an ordering key, then r.Headers in the case given (with
// r.Traceparent, when set, in place of theirs). Send sends
// exactly these (it builds them here); the console shows them, its
// signatures masked. Header does not check r (Send does).
func Header(r Request, h Headers, ts int64, sig Signatures) http.Header {
	return header(r, cmp.Or(h, FluxoraHeaders|StandardHeaders), strconv.FormatInt(ts, 10), sig)
}

// header is Header with the timestamp as text.
func header(r Request, families Headers, ts string, sig Signatures) http.Header {
	flux, std := families&FluxoraHeaders != 0, families&StandardHeaders != 0
	var fluxSig, stdID, stdTS, stdSig string
	if flux {
		fluxSig = sig.Fluxora // the timestamp stays: webhook-timestamp carries the same seconds
	}
	if std {
		stdID, stdTS, stdSig = r.DeliveryID, ts, sig.Standard
	}
	// One array backs every header value: one allocation instead of eleven.
	vals := [...]string{"application/json", userAgent, r.DeliveryID, r.EventType, ts, fluxSig, strconv.Itoa(r.Attempt), r.Endpoint,
		stdID, stdTS, stdSig}
	backing := vals[:] // escapes: the header map keeps it
	h := make(http.Header, len(vals)+len(r.Headers))
	for i, key := range [...]string{"Content-Type", "User-Agent", "X-Fluxora-Delivery-Id",
		"X-Fluxora-Event", "X-Fluxora-Timestamp", "X-Fluxora-Signature", "X-Fluxora-Attempt", "X-Fluxora-Endpoint",
		"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
		// A family's signature header is sent even empty (the console
		// passes none); any other header only with a value.
		if backing[i] != "" || i == 5 && flux || i == 10 && std {
			h[key] = backing[i : i+1 : i+1]
		}
	}
	if r.OrderingKey != "" {
		ord := [...]string{r.OrderingKey, strconv.FormatInt(r.Sequence, 10)}
		h["Webhook-Ordering-Key"], h["X-Fluxora-Ordering-Key"] = ord[0:1:1], ord[0:1:1]
		h["Webhook-Sequence"], h["X-Fluxora-Sequence"] = ord[1:2:2], ord[1:2:2]
	}
	placed := r.Traceparent == "" // nothing to place, or placed among the event's headers
	if len(r.Headers) > 0 {
		extra := make([]string, len(r.Headers)) // one array backs the event's values too
		for i, f := range r.Headers {
			extra[i] = f.Value
			if !placed && strings.EqualFold(f.Name, "traceparent") {
				extra[i], placed = r.Traceparent, true // the attempt's span, child of the producer's
			}
			h[f.Name] = extra[i : i+1 : i+1] // as given: eventheaders.Check refused every name above
		}
	}
	if !placed {
		h["Traceparent"] = []string{r.Traceparent}
	}
	return h
}

// newRequest builds the signed POST, timestamped and signed afresh.
func (s *Sender) newRequest(ctx context.Context, r Request) *http.Request {
	clock := s.now()
	now := clock.Unix()
	var ts string
	var sig Signatures
	if s.headers&FluxoraHeaders != 0 {
		sg := s.signers.Get().(*signer)
		ts, sig.Fluxora = sg.sign(now, r.Payload)
		s.signers.Put(sg)
	} else {
		ts = strconv.FormatInt(now, 10)
	}
	if s.headers&StandardHeaders != 0 {
		sig.Standard = s.current.sign(r.DeliveryID, now, r.Payload)
		if s.previous != nil && clock.Before(s.prevUntil) {
			sig.Standard += " " + s.previous.sign(r.DeliveryID, now, r.Payload) // the new one first
		}
	}
	h := header(r, s.headers, ts, sig)
	req := &http.Request{
		Method:        http.MethodPost,
		URL:           s.url,
		Host:          s.url.Host,
		Header:        h,
		ContentLength: int64(len(r.Payload)),
		Body:          newBody(r.Payload),
		GetBody:       func() (io.ReadCloser, error) { return newBody(r.Payload), nil },
	}
	return req.WithContext(ctx)
}

// newBody is a request body over a payload: an io.NopCloser over a
// *bytes.Reader, which net/http knows to be in memory, so that the
// request's headers and body go out in one write. A body type of our own
// made it flush the headers first: two writes, two TCP segments and two
// reads at the consumer for every delivery, and a drain's worker busy
// in write(2).
func newBody(p []byte) io.ReadCloser {
	if len(p) == 0 {
		return http.NoBody
	}
	return io.NopCloser(bytes.NewReader(p))
}

// readResponse reads at most MaxResponseBytes of the body, closes it and
// classifies the response.
func (s *Sender) readResponse(ctx, reqCtx context.Context, resp *http.Response) Result {
	_, err := io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))
	resp.Body.Close()
	res := Result{Outcome: Classify(resp.StatusCode), Status: resp.StatusCode}
	switch {
	case err != nil:
		res.Outcome, res.Error = Retryable, s.errorText(ctx, reqCtx, err)
		if res.Error != timeoutText(s.timeout) {
			res.Error = truncate("read response: " + res.Error)
		}
	case res.Outcome == Delivered:
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		res.Error = "redirect " + strconv.Itoa(resp.StatusCode) + " not followed"
	default:
		res.Error = "http " + strconv.Itoa(resp.StatusCode)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter, _ = ParseRetryAfter(resp.Header.Get("Retry-After"), s.now())
	}
	return res
}
