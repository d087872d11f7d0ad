// Package waitfor waits in tests for a condition, with a deadline, instead of
// sleeping a fixed time.
package waitfor

import (
	"testing"
	"time"
)

// True polls cond every 5 ms until it holds or timeout passes, then fails the
// test with msg.
func True(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v: %s", timeout, msg)
		}
		<-tick.C
	}
}
