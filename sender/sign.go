package sender

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
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
