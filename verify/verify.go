// Package verify is the consumer's side of the Fluxora webhook contract: it
// checks that a request was signed by the worker, recently, and returns the
// event.
//
// The contract: x-fluxora-signature is the lowercase hex HMAC-SHA256, keyed
// with the shared secret, of x-fluxora-timestamp (Unix seconds) + "." + the
// raw body; the timestamp must be within Tolerance (300 s) of now; the body
// is at most MaxBody (256 KiB). Deliveries are at-least-once: deduplicate by
// Event.DeliveryID.
package verify

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

const (
	// ToleranceDefault is how far the timestamp may be from now.
	ToleranceDefault = 300 * time.Second
	// MaxBody is the largest body accepted, in bytes.
	MaxBody = 256 << 10
)

// Errors returned by Verify; test with errors.Is.
var (
	ErrMissingHeader = errors.New("verify: missing x-fluxora header")
	ErrBadTimestamp  = errors.New("verify: x-fluxora-timestamp is not Unix seconds")
	ErrStale         = errors.New("verify: x-fluxora-timestamp outside the tolerance")
	ErrBadSignature  = errors.New("verify: signature does not match")
	ErrBodyTooLarge  = errors.New("verify: body over 256 KiB")
)

// Verifier checks requests signed with Secret.
type Verifier struct {
	// Secret is WEBHOOK_SECRET. Required.
	Secret []byte
	// Tolerance is the largest accepted clock difference. Defaults to
	// ToleranceDefault (300s).
	Tolerance time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Event is a verified delivery.
type Event struct {
	DeliveryID string // the same on every retry: deduplicate by it
	Type       string // x-fluxora-event
	Attempt    int    // 1 for the first attempt
	Timestamp  time.Time
	Body       []byte // the raw JSON payload
}

// Verify reads r's body (at most MaxBody) and checks its headers and
// signature. It never echoes the secret or the body in an error.
func (v *Verifier) Verify(r *http.Request) (Event, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return Event{}, fmt.Errorf("verify: read body: %w", err)
	}
	if len(body) > MaxBody {
		return Event{}, ErrBodyTooLarge
	}
	ev := Event{DeliveryID: r.Header.Get("x-fluxora-delivery-id"), Type: r.Header.Get("x-fluxora-event"), Body: body}
	ts, sig := r.Header.Get("x-fluxora-timestamp"), r.Header.Get("x-fluxora-signature")
	if ev.DeliveryID == "" || ev.Type == "" || ts == "" || sig == "" {
		return Event{}, ErrMissingHeader
	}
	if ev.Timestamp, err = v.Check(ts, sig, body); err != nil {
		return Event{}, err
	}
	ev.Attempt, _ = strconv.Atoi(r.Header.Get("x-fluxora-attempt"))
	return ev, nil
}

// Check verifies a timestamp header, a signature header and a raw body,
// returning the timestamp.
func (v *Verifier) Check(timestamp, signature string, body []byte) (time.Time, error) {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, ErrBadTimestamp
	}
	ts := time.Unix(sec, 0)
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	tol := cmp.Or(v.Tolerance, ToleranceDefault)
	if d := now.Sub(ts); d > tol || d < -tol {
		return time.Time{}, ErrStale
	}
	want := Sign(v.Secret, sec, body)
	if len(body) > MaxBody {
		return time.Time{}, ErrBodyTooLarge
	}
	if !hmac.Equal([]byte(want), []byte(signature)) {
		return time.Time{}, ErrBadSignature
	}
	return ts, nil
}

// Sign computes the signature the worker sends: lowercase hex
// HMAC-SHA256(secret, timestamp + "." + body).
func Sign(secret []byte, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}
