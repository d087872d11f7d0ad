package sender

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strconv"
	"sync"

	"github.com/fluxora/webhook-worker/signingkey"
)

// Sign returns lowercase hex of HMAC-SHA256(secret, strconv.FormatInt(ts,10)
// + "." + body): the x-fluxora-signature of a request whose
// x-fluxora-timestamp is ts (Unix seconds). The result is always 64 bytes.
func Sign(secret []byte, ts int64, body []byte) string {
	sg := signer{mac: hmac.New(sha256.New, secret)}
	_, sig := sg.sign(ts, body)
	return sig
}

// signer holds a keyed HMAC and the scratch space for one signature, so that
// Send, which takes signers from a sync.Pool, allocates only the final
// string.
type signer struct {
	mac hash.Hash
	sum [sha256.Size]byte
	// buf holds the decimal timestamp and then, over the '.' that followed
	// it while hashing, the hex signature.
	buf [20 + 1 + 2*sha256.Size]byte
}

// sign returns the decimal timestamp and the signature of body at ts. Both
// strings share one allocation.
func (sg *signer) sign(ts int64, body []byte) (tsText, sig string) {
	sg.mac.Reset()
	b := strconv.AppendInt(sg.buf[:0], ts, 10)
	n := len(b)
	sg.mac.Write(append(b, '.'))
	sg.mac.Write(body)
	hex.Encode(sg.buf[n:n+2*sha256.Size], sg.mac.Sum(sg.sum[:0]))
	both := string(sg.buf[:n+2*sha256.Size])
	return both[:n], both[n:]
}

// StandardKey is the Standard Webhooks signing key of a secret: the
// base64-decoded part of a "whsec_" secret, standard base64 with or without
// its '=' padding (as the npm standardwebhooks and svix libraries read it),
// and the secret's own bytes otherwise (also a "whsec_" secret whose rest is
// not base64, or is empty). A consumer hands the first kind to a Standard
// Webhooks library as it is (NewWebhook("whsec_…"); the official Go library
// v1.3.0 wants it padded), the second as raw bytes (NewWebhookRaw).
func StandardKey(secret []byte) []byte {
	if rest, ok := bytes.CutPrefix(secret, []byte("whsec_")); ok {
		if key := decodeBase64(string(rest)); len(key) > 0 {
			return key
		}
	}
	return bytes.Clone(secret)
}

// decodeBase64 decodes standard base64, padded or not; nil when s is
// neither.
func decodeBase64(s string) []byte {
	if key, err := base64.StdEncoding.DecodeString(s); err == nil {
		return key
	}
	if key, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		return key
	}
	return nil
}

// SignStandard returns the webhook-signature of a request: "v1," and the
// base64 HMAC-SHA256(key, id + "." + ts + "." + body), key from
// StandardKey.
func SignStandard(key []byte, id string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	return signStandard(mac, id, ts, body)
}

// SignEd25519 returns the webhook-signature entry of an ed25519 key: "v1a,"
// and the standard base64 of the ed25519 signature of id + "." + ts + "."
// + body, the content "v1," signs (Standard Webhooks, asymmetric).
func SignEd25519(key ed25519.PrivateKey, id string, ts int64, body []byte) string {
	return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(key, standardContent(id, ts, body)))
}

// standardContent is id + "." + ts + "." + body in one slice: ed25519 signs
// a whole message (its hash reads it twice), unlike an HMAC, which streams.
func standardContent(id string, ts int64, body []byte) []byte {
	msg := make([]byte, 0, len(id)+22+len(body))
	msg = append(append(msg, id...), '.')
	msg = append(strconv.AppendInt(msg, ts, 10), '.')
	return append(msg, body...)
}

// standardSigner makes one secret's webhook-signature entry: "v1," with
// an HMAC secret (keyed MACs from a pool), "v1a," with an ed25519 key
// (signingkey.Private).
type standardSigner struct {
	ed   ed25519.PrivateKey // nil for an HMAC secret
	macs sync.Pool          // of hash.Hash keyed with StandardKey(secret)
}

func newStandardSigner(secret []byte) *standardSigner {
	if key, ok := signingkey.Private(secret); ok {
		return &standardSigner{ed: key}
	}
	key := StandardKey(secret)
	return &standardSigner{macs: sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}}
}

func (k *standardSigner) sign(id string, ts int64, body []byte) string {
	if k.ed != nil {
		return SignEd25519(k.ed, id, ts, body)
	}
	mac := k.macs.Get().(hash.Hash)
	defer k.macs.Put(mac)
	return signStandard(mac, id, ts, body)
}

func signStandard(mac hash.Hash, id string, ts int64, body []byte) string {
	mac.Reset()
	var buf [20]byte
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(buf[:0], ts, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	var sum [sha256.Size]byte
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(sum[:0]))
}
