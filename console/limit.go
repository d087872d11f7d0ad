package console

import (
	"slices"
	"sync"
	"time"
)

// The login limit slows the guessing of tokens without ever refusing the
// right one: the token is checked first and only a wrong one is counted,
// so no operator is locked out by someone else's guesses, not even behind
// a proxy that gives everyone one address. Each address (an IPv6
// client's /64) may guess wrong loginBurst times, then once every
// loginEvery; every address together allBurst times, then once every
// allEvery. A guess over either limit is answered 429.
const (
	loginBurst = 10
	loginEvery = 6 * time.Second
	allBurst   = 100
	allEvery   = time.Second
	// limiterMax bounds the addresses remembered. A full table first
	// forgets the addresses whose bucket is full again (as if never seen),
	// then the least recently seen that may still guess, down to
	// limiterKeep; never one being throttled. While every address in it is
	// throttled, newcomers share one bucket (overflow).
	limiterMax  = 10_000
	limiterKeep = limiterMax * 9 / 10
)

// bucket is a token bucket: tokens wrong guesses left, as of at.
type bucket struct {
	tokens float64
	at     time.Time
	seen   time.Time // the last wrong guess
}

// fill adds what has dripped in since b.at, up to burst.
func (b *bucket) fill(now time.Time, burst float64, every time.Duration) {
	if now.After(b.at) {
		b.tokens = min(burst, b.tokens+float64(now.Sub(b.at))/float64(every))
		b.at = now
	}
}

// limiter counts wrong tokens, by address and overall.
type limiter struct {
	mu    sync.Mutex
	now   func() time.Time
	addrs map[string]*bucket
	// all counts every wrong guess; overflow those of addresses the full
	// table cannot hold.
	all, overflow bucket
	// noRoomUntil: the table was full of throttled addresses; none can be
	// forgotten before then.
	noRoomUntil time.Time
}

func newLimiter(now func() time.Time) *limiter {
	t := now()
	return &limiter{now: now, addrs: map[string]*bucket{},
		all: bucket{tokens: allBurst, at: t}, overflow: bucket{tokens: loginBurst, at: t}}
}

// wrong counts a wrong token from addr and says whether it was within the
// limit (false: answer 429).
func (l *limiter) wrong(addr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucket(addr, now)
	b.fill(now, loginBurst, loginEvery)
	b.seen = now
	l.all.fill(now, allBurst, allEvery)
	if b.tokens < 1 || l.all.tokens < 1 {
		return false
	}
	b.tokens--
	l.all.tokens--
	return true
}

// bucket is addr's bucket, a new full one if it has none (overflow when
// the table has no room).
func (l *limiter) bucket(addr string, now time.Time) *bucket {
	if b := l.addrs[addr]; b != nil {
		return b
	}
	if len(l.addrs) >= limiterMax && !l.makeRoom(now) {
		return &l.overflow
	}
	b := &bucket{tokens: loginBurst, at: now}
	l.addrs[addr] = b
	return b
}

// makeRoom forgets the full buckets, then the least recently seen of the
// addresses not throttled, down to limiterKeep, and says whether there is
// room now.
func (l *limiter) makeRoom(now time.Time) bool {
	if now.Before(l.noRoomUntil) {
		return false
	}
	var free []string // may still guess
	for a, b := range l.addrs {
		b.fill(now, loginBurst, loginEvery)
		switch {
		case b.tokens >= loginBurst:
			delete(l.addrs, a)
		case b.tokens >= 1:
			free = append(free, a)
		}
	}
	if n := len(l.addrs) - limiterKeep; n > 0 {
		slices.SortFunc(free, func(x, y string) int { return l.addrs[x].seen.Compare(l.addrs[y].seen) })
		for _, a := range free[:min(n, len(free))] {
			delete(l.addrs, a)
		}
	}
	if len(l.addrs) < limiterMax {
		return true
	}
	l.noRoomUntil = now.Add(loginEvery)
	return false
}
