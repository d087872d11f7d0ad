// Package verify is the consumer's side of the Fluxora webhook contract: it
// checks that a request was signed by the worker, recently, and returns the
// event.
//
// The contract: x-fluxora-signature is the lowercase hex HMAC-SHA256, keyed
// with the shared secret, of x-fluxora-timestamp (Unix seconds) + "." + the
// raw body; the timestamp must be within Tolerance (300 s) of now; the body
// is at most MaxBody (256 KiB). Deliveries are at-least-once: deduplicate by
// Event.DeliveryID.
//
// A request signed only with the Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature: "v1," and the base64 HMAC-SHA256 of
// id + "." + timestamp + "." + body, keyed with the base64 part of a whsec_
// secret, or the secret's bytes otherwise) is verified by those.
//
// An endpoint that signs with ed25519 (Standard Webhooks' asymmetric
// scheme) gives its consumers a public key, "whpk_" and the base64 of its
// 32 bytes: a Verifier whose Secret is that key checks the "v1a,"
// signatures of webhook-signature (the ed25519 signature of the same id +
// "." + timestamp + "." + body, in base64). It cannot sign: a leak at the
// consumer cannot forge a delivery. Such requests carry no
// x-fluxora-signature.
//
// During a secret rotation, Previous is accepted until PreviousUntil; after
// it, a request signed with it only fails with ErrPreviousExpired. While the
// worker's grace period lasts, its webhook-signature carries a signature
// with each secret: a Verifier still holding only the old secret accepts the
// request by that header, though x-fluxora-signature is the new secret's.
// Secret and Previous may be of either kind (a rotation from a shared
// secret to a key pair, or back).
package verify

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fluxora/webhook-worker/signingkey"
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
	// ErrPreviousExpired: the request is signed with the previous secret,
	// whose grace period (PreviousUntil) is over.
	ErrPreviousExpired = errors.New("verify: signed with the previous secret, whose grace period is over")
	// ErrBadKey: Secret or Previous starts with "whpk_" but is not an
	// ed25519 public key (the base64 of 32 bytes after the prefix).
	ErrBadKey = errors.New("verify: a whpk_ key must be whpk_ and the base64 of a 32-byte ed25519 public key")
)

// Verifier checks requests signed with Secret.
type Verifier struct {
	// Secret is the endpoint's secret (a whsec_ secret, or WEBHOOK_SECRET)
	// or, for an endpoint that signs with ed25519, its public key
	// ("whpk_…"), which checks the "v1a," signatures of webhook-signature
	// alone. Required.
	Secret []byte
	// Tolerance is the largest accepted clock difference. Defaults to
	// ToleranceDefault (300s).
	Tolerance time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Previous is the secret (or public key) before a rotation, accepted
	// until PreviousUntil (the worker's grace period). Optional.
	Previous      []byte
	PreviousUntil time.Time
}

// Event is a verified delivery.
type Event struct {
	DeliveryID string // the same on every retry: deduplicate by it
	Type       string // x-fluxora-event
	Attempt    int    // 1 for the first attempt
	Timestamp  time.Time
	Body       []byte // the raw JSON payload
	// OrderingKey is the event's ordering key ("" for none) and Sequence
	// its place among the key's deliveries to this endpoint (1, 2, 3, …;
	// a number skipped: a delivery in between was dead-lettered). Not
	// signed.
	OrderingKey string
	Sequence    int64
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
	if sig == "" && r.Header.Get("webhook-signature") != "" {
		ev.DeliveryID, ts = r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
		if ev.DeliveryID == "" || ev.Type == "" || ts == "" {
			return Event{}, ErrMissingHeader
		}
		if ev.Timestamp, err = v.CheckStandard(ev.DeliveryID, ts, r.Header.Get("webhook-signature"), body); err != nil {
			return Event{}, err
		}
	} else {
		if ev.DeliveryID == "" || ev.Type == "" || ts == "" || sig == "" {
			return Event{}, ErrMissingHeader
		}
		if ev.Timestamp, err = v.Check(ts, sig, body); err != nil {
			// During the worker's grace period x-fluxora-signature is the
			// new secret's alone, but webhook-signature also carries the
			// previous secret's: a consumer not yet given the new secret
			// is accepted by that one.
			std, id := r.Header.Get("webhook-signature"), r.Header.Get("webhook-id")
			if !errors.Is(err, ErrBadSignature) || std == "" || id != ev.DeliveryID || r.Header.Get("webhook-timestamp") != ts {
				return Event{}, err
			}
			if ev.Timestamp, err = v.CheckStandard(id, ts, std, body); err != nil {
				return Event{}, err
			}
		}
	}
	ev.Attempt, _ = strconv.Atoi(r.Header.Get("x-fluxora-attempt"))
	ev.OrderingKey = cmp.Or(r.Header.Get("webhook-ordering-key"), r.Header.Get("x-fluxora-ordering-key"))
	ev.Sequence, _ = strconv.ParseInt(cmp.Or(r.Header.Get("webhook-sequence"), r.Header.Get("x-fluxora-sequence")), 10, 64)
	return ev, nil
}

// now is the verifier's clock.
func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// timestamp parses and checks a timestamp header against the tolerance.
func (v *Verifier) timestamp(text string) (int64, time.Time, error) {
	sec, err := strconv.ParseInt(text, 10, 64)
	if err != nil || sec < 0 {
		return 0, time.Time{}, ErrBadTimestamp
	}
	ts := time.Unix(sec, 0)
	tol := cmp.Or(v.Tolerance, ToleranceDefault)
	if d := v.now().Sub(ts); d > tol || d < -tol {
		return 0, time.Time{}, ErrStale
	}
	return sec, ts, nil
}

// key is a Secret or Previous as it verifies: an HMAC secret, or an
// ed25519 public key (whpk_…).
type key struct {
	secret []byte            // the HMAC secret when public is nil
	public ed25519.PublicKey // nil for a secret
}

// readKey reads b: a whpk_ public key, or else a secret. A whpk_ value
// that is not a key is ErrBadKey: never an HMAC secret, which anyone
// holding the public key could sign with.
func readKey(b []byte) (key, error) {
	if !bytes.HasPrefix(b, []byte(signingkey.PublicPrefix)) {
		return key{secret: b}, nil
	}
	pub, err := signingkey.ParsePublic(string(b))
	if err != nil {
		return key{}, ErrBadKey
	}
	return key{public: pub}, nil
}

// secrets tries match with the secret, then the previous one: nil when one
// matches within its validity, ErrPreviousExpired when only an expired
// previous secret matches, ErrBadSignature otherwise, ErrBadKey for a
// whpk_ key that does not read.
func (v *Verifier) secrets(match func(k key) bool) error {
	cur, err := readKey(v.Secret)
	if err != nil {
		return err
	}
	if match(cur) {
		return nil
	}
	if len(v.Previous) == 0 {
		return ErrBadSignature
	}
	prev, err := readKey(v.Previous)
	if err != nil {
		return err
	}
	if match(prev) {
		if v.now().Before(v.PreviousUntil) {
			return nil
		}
		return ErrPreviousExpired
	}
	return ErrBadSignature
}

// CheckStandard verifies Standard Webhooks headers (webhook-id,
// webhook-timestamp, webhook-signature) and a raw body, returning the
// timestamp. Any of the space-separated signatures may match: "v1," ones
// with a secret, "v1a," ones with a public key.
func (v *Verifier) CheckStandard(id, timestamp, signatures string, body []byte) (time.Time, error) {
	sec, ts, err := v.timestamp(timestamp)
	if err != nil {
		return time.Time{}, err
	}
	err = v.secrets(func(k key) bool {
		if k.public != nil {
			return verifyEd25519(k.public, id, sec, body, signatures)
		}
		want := SignStandard(k.secret, id, sec, body)
		for _, got := range strings.Fields(signatures) {
			if hmac.Equal([]byte(want), []byte(got)) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return time.Time{}, err
	}
	return ts, nil
}

// SignStandard computes a Standard Webhooks signature as the worker does:
// "v1," and the base64 HMAC-SHA256(key, id + "." + timestamp + "." + body),
// the key being the decoded part of a "whsec_" secret (standard base64,
// with or without its '=' padding), or the secret's own bytes when that part
// is empty or not base64.
func SignStandard(secret []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, standardKey(secret))
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// verifyEd25519 reports whether one of the "v1a," signatures is pub's
// ed25519 signature of id + "." + timestamp + "." + body.
func verifyEd25519(pub ed25519.PublicKey, id string, timestamp int64, body []byte, signatures string) bool {
	var content []byte
	for _, got := range strings.Fields(signatures) {
		b64, ok := strings.CutPrefix(got, "v1a,")
		if !ok {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		if content == nil {
			content = append(strconv.AppendInt([]byte(id+"."), timestamp, 10), '.')
			content = append(content, body...)
		}
		if ed25519.Verify(pub, content, sig) {
			return true
		}
	}
	return false
}

// standardKey is the Standard Webhooks key of a secret, by the worker's
// rule (sender.StandardKey).
func standardKey(secret []byte) []byte {
	if rest, ok := bytes.CutPrefix(secret, []byte("whsec_")); ok {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			if k, err := enc.DecodeString(string(rest)); err == nil && len(k) > 0 {
				return k
			}
		}
	}
	return secret
}

// Check verifies a timestamp header, a signature header and a raw body,
// returning the timestamp.
func (v *Verifier) Check(timestamp, signature string, body []byte) (time.Time, error) {
	sec, ts, err := v.timestamp(timestamp)
	if err != nil {
		return time.Time{}, err
	}
	if len(body) > MaxBody {
		return time.Time{}, ErrBodyTooLarge
	}
	err = v.secrets(func(k key) bool {
		// A public key checks no x-fluxora-signature: Verify then tries
		// webhook-signature.
		return k.public == nil && hmac.Equal([]byte(Sign(k.secret, sec, body)), []byte(signature))
	})
	if err != nil {
		return time.Time{}, err
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
