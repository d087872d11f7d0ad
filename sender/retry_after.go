package sender

import (
	"net/http"
	"strconv"
	"time"
)

// MaxRetryAfter is the largest delay ParseRetryAfter returns (24h); larger
// values are clamped to it.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter parses a Retry-After header value: delta-seconds (a
// non-negative decimal integer, no sign) or an HTTP-date, which is taken
// relative to now; a date in the past gives 0, true. Delays above
// MaxRetryAfter (24h) are clamped to it. Anything else (empty, negative,
// garbage, a number too large for int64) gives 0, false.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false // overflow
		}
		return time.Duration(min(secs, int64(MaxRetryAfter/time.Second))) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}

// isDigits reports whether v is non-empty and all ASCII digits.
func isDigits(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return v != ""
}
