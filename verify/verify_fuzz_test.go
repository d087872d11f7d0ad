package verify_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/verify"
)

// FuzzCheck: Check never panics, accepts exactly the worker's own signature
// for any body, and refuses a signature computed with another secret.
func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"a":1}`), "1700000000", "x")
	f.Add([]byte{}, "-1", "")
	f.Add([]byte("\xff\x00"), "99999999999999999999", "0000")
	f.Fuzz(func(t *testing.T, body []byte, ts, sig string) {
		now := time.Unix(1700000000, 0)
		v := &verify.Verifier{Secret: []byte("k"), Now: func() time.Time { return now }}
		_, _ = v.Check(ts, sig, body) // arbitrary input: no panic
		good := verify.Sign([]byte("k"), now.Unix(), body)
		_, err := v.Check(strconv.FormatInt(now.Unix(), 10), good, body)
		if len(body) <= verify.MaxBody && err != nil {
			t.Fatalf("own signature refused: %v", err)
		}
		if _, err := v.Check(strconv.FormatInt(now.Unix(), 10), verify.Sign([]byte("other"), now.Unix(), body), body); err == nil {
			t.Fatal("signature with another secret accepted")
		}
	})
}
