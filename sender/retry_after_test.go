package sender_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/sender"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	date := func(d time.Duration) string { return now.Add(d).UTC().Format(http.TimeFormat) }
	tests := []struct {
		name, v string
		want    time.Duration
		ok      bool
	}{
		{"Zero", "0", 0, true},
		{"Seconds", "120", 120 * time.Second, true},
		{"LeadingZeros", "007", 7 * time.Second, true},
		{"DayExactly", "86400", 24 * time.Hour, true},
		{"HugeSecondsClamped", "999999999999", sender.MaxRetryAfter, true},
		{"MaxInt64Clamped", "9223372036854775807", sender.MaxRetryAfter, true},
		{"Overflow", "9223372036854775808", 0, false},
		{"ManyDigits", "123456789012345678901234567890", 0, false},
		{"Negative", "-5", 0, false},
		{"Plus", "+5", 0, false},
		{"Fraction", "1.5", 0, false},
		{"Space", " 5", 0, false},
		{"Empty", "", 0, false},
		{"Garbage", "soon", 0, false},
		{"DateFuture", date(30 * time.Second), 30 * time.Second, true},
		{"DatePast", date(-time.Hour), 0, true},
		{"DateFarFuture", date(100 * 24 * time.Hour), sender.MaxRetryAfter, true},
		{"DateRFC850", now.Add(time.Minute).UTC().Format("Monday, 02-Jan-06 15:04:05 GMT"), time.Minute, true},
		{"DateANSIC", now.Add(time.Minute).UTC().Format(time.ANSIC), time.Minute, true},
		{"DateNotGMT", now.Add(time.Minute).UTC().Format(time.RFC3339), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := sender.ParseRetryAfter(tt.v, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.v, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"0", "120", "-1", "+1", "1e3", "99999999999999999999",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Fri, 31 Dec 9999 23:59:59 GMT", "", " ", "\x00"} {
		f.Add(seed, int64(1700000000))
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		d, ok := sender.ParseRetryAfter(v, time.Unix(nowUnix, 0))
		if d < 0 || d > sender.MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, %v]", v, d, sender.MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", v, d)
		}
	})
}
