package main

import (
	"net/http"
	"time"
)

// apiLimit is a rate limit as an API enforces it: a token bucket of rate
// requests a second holding at most burst, one token a request; a request
// that finds no token is answered 429 with Retry-After: 1, as most APIs
// with a per-second limit answer, and counts as refused.
type apiLimit struct {
	rate, burst float64
}

// bucket is an apiLimit's state in one run.
type bucket struct {
	tokens float64
	at     time.Time
}

// take refills b for the time since its last request under l and takes a
// token if there is one.
func (b *bucket) take(l apiLimit, now time.Time) bool {
	if b.at.IsZero() {
		b.tokens = l.burst
	} else {
		b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// limit makes endpoint name enforce l from the next run on (reset).
func (c *endpointConsumer) limit(name string, l apiLimit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limits == nil {
		c.limits = map[string]apiLimit{}
	}
	c.limits[name] = l
}

// admit takes a token of endpoint name's limit for a request that arrived
// at; false (counted as refused) when the limit refuses it. Endpoints
// without a limit admit everything.
func (c *endpointConsumer) admit(name string, at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.limits[name]
	if !ok {
		return true
	}
	s := c.run
	b := s.buckets[name]
	if b == nil {
		b = &bucket{}
		s.buckets[name] = b
	}
	if b.take(l, at) {
		return true
	}
	s.refused[name]++
	return false
}

// refuse answers a request the limit refused.
func refuse(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
}

// busiest is the most of times in any window of width w.
func busiest(times []time.Time, w time.Duration) int {
	most := 0
	for i, j := 0, 0; j < len(times); j++ {
		for times[j].Sub(times[i]) >= w {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}
