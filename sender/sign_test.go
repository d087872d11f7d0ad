package sender_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"testing"

	"github.com/fluxora/webhook-worker/sender"
)

// signVector was computed outside Go:
//
//	printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test
const signVector = "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"

func TestSign(t *testing.T) {
	t.Parallel()
	t.Run("KnownVector", func(t *testing.T) {
		t.Parallel()
		if got := sender.Sign([]byte("whsec_test"), 1700000000, []byte(`{"a":1}`)); got != signVector {
			t.Fatalf("Sign = %s, want %s", got, signVector)
		}
	})
	t.Run("DependsOnEveryInput", func(t *testing.T) {
		t.Parallel()
		base := sender.Sign([]byte("whsec_test"), 1700000000, []byte(`{"a":1}`))
		for name, got := range map[string]string{
			"secret": sender.Sign([]byte("whsec_tesT"), 1700000000, []byte(`{"a":1}`)),
			"ts":     sender.Sign([]byte("whsec_test"), 1700000001, []byte(`{"a":1}`)),
			"body":   sender.Sign([]byte("whsec_test"), 1700000000, []byte(`{"a":2}`)),
		} {
			if got == base {
				t.Errorf("changing %s left the signature unchanged", name)
			}
		}
	})
}

func FuzzSign(f *testing.F) {
	f.Add([]byte("whsec_test"), int64(1700000000), []byte(`{"a":1}`))
	f.Add([]byte{}, int64(0), []byte{})
	f.Add([]byte("k"), int64(-1), []byte("\x00\xff"))
	f.Add(make([]byte, 200), int64(-9223372036854775808), []byte(`{"long":"`+string(make([]byte, 300))+`"}`))
	f.Fuzz(func(t *testing.T, secret []byte, ts int64, body []byte) {
		got := sender.Sign(secret, ts, body)
		if again := sender.Sign(secret, ts, body); again != got {
			t.Fatalf("not deterministic: %s then %s", got, again)
		}
		if len(got) != 64 {
			t.Fatalf("len = %d, want 64", len(got))
		}
		for _, c := range got {
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				t.Fatalf("%q is not lowercase hex", got)
			}
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(strconv.FormatInt(ts, 10) + "." + string(body)))
		if want := hex.EncodeToString(mac.Sum(nil)); got != want {
			t.Fatalf("Sign = %s, want %s", got, want)
		}
	})
}

func BenchmarkSign(b *testing.B) {
	secret, body := []byte("whsec_test"), []byte(`{"a":1}`)
	b.ReportAllocs()
	for b.Loop() {
		sender.Sign(secret, 1700000000, body)
	}
}
