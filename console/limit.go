package console

import (
	"sync"
	"time"
)

// The login limit: each address may fail loginBurst times, then one more
// time every loginEvery. Correct tokens are refused too while it is
// spent, so that guessing cannot go faster.
const (
	loginBurst = 10
	loginEvery = 6 * time.Second
	// limiterMax bounds the addresses remembered; past it the oldest
	// state is forgotten wholesale.
	limiterMax = 10_000
)

// limiter counts failed logins by address (a leaky bucket per address).
type limiter struct {
	mu  sync.Mutex
	now func() time.Time
	// full is when each address's failures have leaked away.
	full map[string]time.Time
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{now: now, full: map[string]time.Time{}}
}

// allow says whether ip may try a token now.
func (l *limiter) allow(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.full[ip].Sub(l.now()) <= (loginBurst-1)*loginEvery
}

// fail counts a failed try of ip.
func (l *limiter) fail(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.full) >= limiterMax {
		clear(l.full)
	}
	from := l.full[ip]
	if from.Before(now) {
		from = now
	}
	l.full[ip] = from.Add(loginEvery)
}
