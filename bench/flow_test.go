package main

import (
	"testing"
	"time"
)

// The API's bucket admits its burst at once, then its rate, and refuses
// what comes between.
func TestAPILimitBucket(t *testing.T) {
	l := apiLimit{rate: 100, burst: 20}
	var b bucket
	t0 := time.Unix(1000, 0)
	admitted := 0
	for range 30 {
		if b.take(l, t0) {
			admitted++
		}
	}
	if admitted != 20 {
		t.Fatalf("a burst of 30 at once: %d admitted, want the bucket's 20", admitted)
	}
	if b.take(l, t0.Add(5*time.Millisecond)) {
		t.Fatal("half a token's time later: admitted, want refused")
	}
	if !b.take(l, t0.Add(15*time.Millisecond)) {
		t.Fatal("a token's time after the last refusal: refused, want admitted")
	}
	// Evenly at the rate for a second: all admitted, the bucket never
	// growing past its burst meanwhile.
	at := t0.Add(time.Second)
	b = bucket{}
	for i := range 200 {
		if !b.take(l, at.Add(time.Duration(i)*10*time.Millisecond)) {
			t.Fatalf("request %d at the rate: refused", i)
		}
	}
}

func TestBusiest(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var times []time.Time
	for i := range 50 { // 50 in the first 490 ms
		times = append(times, t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	for i := range 30 { // 30 more from 990 ms to 1280 ms
		times = append(times, t0.Add(990*time.Millisecond+time.Duration(i)*10*time.Millisecond))
	}
	// [0, 1 s) holds the first 50 and the one at 990 ms; no other second
	// holds more.
	if got := busiest(times, time.Second); got != 51 {
		t.Fatalf("busiest second: %d, want 51", got)
	}
	if got := busiest(times[:50], 100*time.Millisecond); got != 10 {
		t.Fatalf("busiest 100 ms at 10 ms apart: %d, want 10", got)
	}
	if got := busiest(nil, time.Second); got != 0 {
		t.Fatalf("busiest of nothing: %d", got)
	}
}
