package main

import (
	"context"
	"time"
)

// profile is how the consumer answers during one mode: how long each
// request waits before its answer, or that it fails or hangs.
type profile int

const (
	// profileInstant answers 200 at once: every mode but retry and the tail
	// modes.
	profileInstant profile = iota
	// profileFailFirst answers 503 to attempt 1 and 200 at once after: the
	// retry mode.
	profileFailFirst
	// profileTail answers 200 after tailService, or after tailSlow for the
	// slow events: the tail mode.
	profileTail
	// profileHang answers 200 after tailService, except that the first
	// attempt of a slow event never answers: the handler blocks until the
	// client gives up or the run ends. The tail-hang mode.
	profileHang
)

// The tail modes' service times and the events they slow down.
const (
	tailService = 20 * time.Millisecond // every request but the slow ones
	tailSlow    = 2 * time.Second       // the slow ones, tail mode
	slowEvery   = 100                   // one event in slowEvery is slow ...
	slowSeq     = 37                    // ... the one with seq % slowEvery == slowSeq
)

// hangForever is the wait of a request that is never answered.
const hangForever time.Duration = -1

// isSlow reports whether the event with this seq is one of the slow ones.
// It depends on the seq only, so every system gets the same slow events.
func isSlow(seq int64) bool { return seq%slowEvery == slowSeq }

// service is how long the consumer waits before answering 200 to this
// attempt of this event: 0 for at once, hangForever for never.
func (p profile) service(seq int64, attempt int) time.Duration {
	switch p {
	case profileTail:
		if isSlow(seq) {
			return tailSlow
		}
		return tailService
	case profileHang:
		if isSlow(seq) && attempt <= 1 {
			return hangForever
		}
		return tailService
	}
	return 0
}

// meanService is the mean service time of a tail profile, where a slow
// request costs its client slow (tailSlow, or the request timeout when the
// consumer hangs): 0.99 × 20 ms + 0.01 × slow.
func meanService(slow time.Duration) time.Duration {
	return tailService + (slow-tailService)/slowEvery
}

// pause waits d (forever for hangForever) and reports whether d passed
// before the request's context or the run ended.
func (s *runState) pause(req context.Context, d time.Duration) bool {
	if d == 0 {
		return true
	}
	var elapsed <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		elapsed = t.C
	}
	select {
	case <-elapsed:
		return true
	case <-req.Done():
	case <-s.ctx.Done():
	}
	return false
}
