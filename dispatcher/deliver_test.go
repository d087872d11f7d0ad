package dispatcher

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt    int
		retryAfter time.Duration
		rnd        float64
		want       time.Duration
	}{
		{1, 0, 0.5, time.Second},
		{2, 0, 0.5, 2 * time.Second},
		{4, 0, 0.5, 8 * time.Second},
		{1, 0, 0, 800 * time.Millisecond},
		{1, 0, 0.999999, 1199999600 * time.Nanosecond},
		{30, 0, 0.5, time.Minute},               // capped
		{200, 0, 0.1, 50400 * time.Millisecond}, // no overflow; jitter applies at the cap
		{1, 20 * time.Second, 0.5, 20 * time.Second},
		{1, time.Hour, 0.5, time.Minute}, // Retry-After within the cap
	} {
		got := backoff(tc.attempt, time.Second, time.Minute, tc.retryAfter, tc.rnd)
		if d := got - tc.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("backoff(%d, ra %v, rnd %v) = %v, want %v", tc.attempt, tc.retryAfter, tc.rnd, got, tc.want)
		}
	}
}

func TestDeferDelay(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]time.Duration{
		-time.Hour:             time.Millisecond,
		0:                      time.Millisecond,
		time.Nanosecond:        time.Millisecond,
		300 * time.Millisecond: 300 * time.Millisecond,
		5 * time.Minute:        5 * time.Minute,
		6 * time.Minute:        5 * time.Minute,
		1<<63 - 1:              5 * time.Minute, // a wrapped 1e18 ms
		-1 << 63:               time.Millisecond,
	} {
		if got := deferDelay(in, 5*time.Minute); got != want {
			t.Errorf("deferDelay(%v) = %v, want %v", in, got, want)
		}
	}
}
