package docsnippets

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/verify"
)

// The snippets below are those of docs/consumers.md, as they stand there
// (TestConsumerDocSnippetsAreRun checks it). apply, verifier and store are
// the application's, given here by the tests.

// --- docs/consumers.md: "With our Go kit" ---

func newKitHandler(secret []byte) http.HandlerFunc {
	v := &verify.Verifier{Secret: secret} // 5 minutes of tolerance, 256 KiB of body
	return func(w http.ResponseWriter, r *http.Request) {
		ev, err := v.Verify(r)
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// Idempotent: apply records ev.DeliveryID in the transaction of the
		// event's effect, and does nothing for an id it has seen.
		if err := apply(r.Context(), ev.DeliveryID, ev.Type, ev.Body); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// --- docs/consumers.md: "With the official Go library" ---

func newStandardHandler(secret string) (http.HandlerFunc, error) {
	wh, err := standardwebhooks.NewWebhook(secret) // a whsec_ secret, padded
	if err != nil {
		return nil, err
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 256<<10))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id, eventType := r.Header.Get("webhook-id"), r.Header.Get("x-fluxora-event")
		if err := apply(r.Context(), id, eventType, body); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}, nil
}

// --- docs/consumers.md: "The Fluxora signature by hand" ---

// verifyFluxora checks x-fluxora-signature: the lowercase hex HMAC-SHA256,
// keyed with the whole secret string, of x-fluxora-timestamp + "." + body.
func verifyFluxora(secret []byte, h http.Header, body []byte, now time.Time) bool {
	ts := h.Get("x-fluxora-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(want), []byte(h.Get("x-fluxora-signature")))
}

// --- docs/consumers.md: "Ed25519 signatures (a public key)" ---

// newKeyVerifier is the page's kit line, for the public key of an
// ed25519 endpoint.
func newKeyVerifier(publicKey string) *verify.Verifier {
	v := &verify.Verifier{Secret: []byte(publicKey)} // "whpk_…": checks v1a signatures, cannot sign
	return v
}

// verifyEd25519 checks the "v1a," entries of webhook-signature with the
// endpoint's public key ("whpk_…"): an ed25519 signature, in standard
// base64, of webhook-id + "." + webhook-timestamp + "." + body.
func verifyEd25519(whpk string, h http.Header, body []byte, now time.Time) bool {
	b64, ok := strings.CutPrefix(whpk, "whpk_")
	pub, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(pub) != ed25519.PublicKeySize {
		return false
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	signed := append([]byte(id+"."+ts+"."), body...)
	for _, entry := range strings.Fields(h.Get("webhook-signature")) {
		sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(entry, "v1a,"))
		if strings.HasPrefix(entry, "v1a,") && err == nil && ed25519.Verify(pub, signed, sig) {
			return true
		}
	}
	return false
}

// --- docs/consumers.md: "Ordered events" ---

func handleOrdered(w http.ResponseWriter, r *http.Request) {
	ev, err := verifier.Verify(r)
	if err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	last := store.LastSequence(ev.OrderingKey) // 0 for a key never seen
	switch {
	case ev.Sequence <= last: // already applied: a redelivery
	case ev.Sequence > last+1: // the events in between were dead-lettered
		store.Resync(ev.OrderingKey) // fetch the entity's state from its source
		store.Apply(ev.OrderingKey, ev.Sequence, ev.Body)
	default:
		store.Apply(ev.OrderingKey, ev.Sequence, ev.Body)
	}
	w.WriteHeader(http.StatusNoContent)
}

// --- the application, for the tests ---

// applied records what apply was given, once per delivery id.
var applied = struct {
	sync.Mutex
	byID map[string]string // delivery id → event type
	n    int               // calls, redeliveries included
}{byID: map[string]string{}}

func apply(_ context.Context, deliveryID, eventType string, _ []byte) error {
	applied.Lock()
	defer applied.Unlock()
	applied.n++
	if _, seen := applied.byID[deliveryID]; !seen {
		applied.byID[deliveryID] = eventType
	}
	return nil
}

var verifier *verify.Verifier

// ledger is the ordered consumer's store: each key's last sequence applied
// and the keys it had to resync.
type ledger struct {
	mu      sync.Mutex
	last    map[string]int64
	resyncs []string
	bodies  []string
}

func (l *ledger) LastSequence(key string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[key]
}

func (l *ledger) Resync(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resyncs = append(l.resyncs, key)
}

func (l *ledger) Apply(key string, seq int64, body []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[key] = seq
	l.bodies = append(l.bodies, string(body))
}

var store = &ledger{last: map[string]int64{}}

// --- the tests ---

// A secret as `worker endpoints add` makes them: whsec_ and the padded
// base64 of 32 bytes.
const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="

// send signs and sends one request with the worker's sender to h, and
// returns what the sender made of the answer.
func send(t *testing.T, cfg sender.Config, req sender.Request, h http.Handler) sender.Result {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.URL = srv.URL
	s, err := sender.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s.Send(context.Background(), req)
}

func request(id string) sender.Request {
	return sender.Request{DeliveryID: id, EventType: "invoice.paid", Attempt: 1, Endpoint: "billing",
		Payload: []byte(`{"amount": 10, "id": 42}`)}
}

func TestKitHandler(t *testing.T) {
	res := send(t, sender.Config{Secret: []byte(whsec)}, request("0b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d01"), newKitHandler([]byte(whsec)))
	if res.Outcome != sender.Delivered {
		t.Fatalf("the kit refused a request the sender signed: %+v", res)
	}
	res = send(t, sender.Config{Secret: []byte("another secret")}, request("0b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d02"), newKitHandler([]byte(whsec)))
	if res.Status != http.StatusUnauthorized || res.Outcome != sender.Permanent {
		t.Fatalf("the kit accepted another secret's signature: %+v", res)
	}
	applied.Lock()
	defer applied.Unlock()
	if applied.byID["0b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d01"] != "invoice.paid" || applied.byID["0b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d02"] != "" {
		t.Fatalf("applied: %v", applied.byID)
	}
}

func TestStandardHandler(t *testing.T) {
	h, err := newStandardHandler(whsec)
	if err != nil {
		t.Fatal(err)
	}
	if res := send(t, sender.Config{Secret: []byte(whsec)}, request("1b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d01"), h); res.Outcome != sender.Delivered {
		t.Fatalf("the official library refused a request the sender signed: %+v", res)
	}
	if res := send(t, sender.Config{Secret: []byte(whsec + "x")}, request("1b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d02"), h); res.Status != http.StatusUnauthorized {
		t.Fatalf("the official library accepted another secret's signature: %+v", res)
	}
	// A secret that is not whsec_ and base64: its bytes are the key.
	const raw = "a shared secret that is not base64"
	wh, err := standardwebhooks.NewWebhookRaw([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	res := send(t, sender.Config{Secret: []byte(raw)}, request("1b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d03"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	if res.Outcome != sender.Delivered {
		t.Fatalf("NewWebhookRaw refused a raw secret's signature: %+v", res)
	}
}

func TestFluxoraByHand(t *testing.T) {
	for _, secret := range []string{whsec, "a shared secret that is not base64"} {
		var ok, wrong bool
		res := send(t, sender.Config{Secret: []byte(secret), Headers: sender.FluxoraHeaders}, request("2b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d01"),
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				ok = verifyFluxora([]byte(secret), r.Header, body, time.Now())
				wrong = verifyFluxora([]byte(secret), r.Header, append(body, ' '), time.Now()) ||
					verifyFluxora([]byte(secret), r.Header, body, time.Now().Add(6*time.Minute))
			}))
		if res.Outcome != sender.Delivered || !ok {
			t.Fatalf("%q: the sender's x-fluxora-signature not verified by hand: %+v", secret, res)
		}
		if wrong {
			t.Fatalf("%q: a changed body or a stale timestamp verified", secret)
		}
	}
}

func TestOrderedHandler(t *testing.T) {
	verifier = &verify.Verifier{Secret: []byte(whsec)}
	for i, seq := range []int64{1, 2, 2, 4} { // a redelivery of 2; 3 dead-lettered
		req := request("3b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d0" + strconv.Itoa(i))
		req.OrderingKey, req.Sequence = "order-42", seq
		req.Payload = []byte(`{"seq": ` + strconv.FormatInt(seq, 10) + `}`)
		if res := send(t, sender.Config{Secret: []byte(whsec)}, req, http.HandlerFunc(handleOrdered)); res.Outcome != sender.Delivered {
			t.Fatalf("sequence %d: %+v", seq, res)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if got := strings.Join(store.bodies, " "); got != `{"seq": 1} {"seq": 2} {"seq": 4}` || store.last["order-42"] != 4 {
		t.Fatalf("applied %s, last %d", got, store.last["order-42"])
	}
	if len(store.resyncs) != 1 {
		t.Fatalf("resyncs %v, want one for the gap", store.resyncs)
	}
}

// During a rotation's grace period a consumer holding either secret
// accepts the request: webhook-signature carries both signatures.
func TestRotationSeenByTheConsumer(t *testing.T) {
	const oldSecret, newSecret = "whsec_c2VjcmV0LWJlZm9yZS10aGUtcm90YXRpb24=", whsec
	graceEnd := time.Now().Add(time.Hour)
	rotating := sender.Config{Secret: []byte(newSecret), PreviousSecret: []byte(oldSecret), PreviousUntil: graceEnd}
	oldLib, err := newStandardHandler(oldSecret)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{
		"kit, old secret":     newKitHandler([]byte(oldSecret)),
		"kit, new secret":     newKitHandler([]byte(newSecret)),
		"library, old secret": oldLib,
	} {
		if res := send(t, rotating, request("4b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d01"), h); res.Outcome != sender.Delivered {
			t.Fatalf("%s: refused during the grace period: %+v", name, res)
		}
	}
	// The kit holding both accepts the old one until graceEnd.
	oldOnly := sender.Config{Secret: []byte(oldSecret)}
	for _, end := range []time.Time{graceEnd, time.Now().Add(-time.Second)} {
		var got error
		send(t, oldOnly, request("4b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d02"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			oldSecret, newSecret, graceEnd := []byte(oldSecret), []byte(newSecret), end
			v := &verify.Verifier{Secret: newSecret, Previous: oldSecret, PreviousUntil: graceEnd}
			_, got = v.Verify(r)
		}))
		if want := end.Before(time.Now()); errors.Is(got, verify.ErrPreviousExpired) != want || (!want && got != nil) {
			t.Fatalf("grace end %v: %v", end, got)
		}
	}
}

// TestConsumerDocSnippetsAreRun fails when a Go block of docs/consumers.md
// is not, line for line (leading blanks aside), code of this file.
func TestConsumerDocSnippetsAreRun(t *testing.T) {
	checkBlocks(t, "../../docs/consumers.md", "consumers_test.go", 7)
}

// checkBlocks fails unless doc has at least want Go blocks and each is,
// line for line (leading blanks aside), code of the test file code.
func checkBlocks(t *testing.T, doc, code string, want int) {
	t.Helper()
	md, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(code)
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(md)
	if len(blocks) < want {
		t.Fatalf("%s has %d Go blocks, want %d", doc, len(blocks), want)
	}
	norm := normalize(src)
	for _, b := range blocks {
		if !strings.Contains(norm, normalize(b)) {
			t.Errorf("this Go block of %s is not run by internal/docsnippets/%s:\n%s", doc, code, b)
		}
	}
}

// goBlocks returns the bodies of the ```go blocks of a Markdown text.
func goBlocks(md []byte) [][]byte {
	var out [][]byte
	var cur *bytes.Buffer
	for line := range bytes.Lines(md) {
		trimmed := bytes.TrimSpace(line)
		switch {
		case cur == nil && bytes.Equal(trimmed, []byte("```go")):
			cur = new(bytes.Buffer)
		case cur != nil && bytes.Equal(trimmed, []byte("```")):
			out = append(out, cur.Bytes())
			cur = nil
		case cur != nil:
			cur.Write(line)
		}
	}
	return out
}

// normalize trims every line and drops the blank ones, so that a block
// matches whatever its indentation.
func normalize(b []byte) string {
	var sb strings.Builder
	for line := range bytes.Lines(b) {
		if l := bytes.TrimSpace(line); len(l) > 0 {
			sb.Write(l)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}
