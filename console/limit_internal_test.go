package console

import (
	"fmt"
	"testing"
	"time"
)

// A full table forgets the least recently seen addresses that may still
// guess, never a throttled one, and never everything at once.
func TestLimiterEvictsOnlyWhoMayGuess(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := newLimiter(func() time.Time { return now })
	guess := func(addr string) bool {
		l.all.tokens = allBurst // the overall limit is not under test
		return l.wrong(addr)
	}
	for range loginBurst {
		guess("throttled")
	}
	if guess("throttled") {
		t.Fatal("the 11th wrong guess was within the limit")
	}
	for i := range 3 * limiterMax {
		now = now.Add(time.Microsecond)
		if !guess(fmt.Sprint("flood-", i)) {
			t.Fatalf("flood address %d refused at its first guess", i)
		}
		if len(l.addrs) > limiterMax {
			t.Fatalf("%d addresses remembered, bound %d", len(l.addrs), limiterMax)
		}
	}
	if _, ok := l.addrs["throttled"]; !ok || guess("throttled") {
		t.Fatal("the flood freed the throttled address")
	}
	if _, ok := l.addrs[fmt.Sprint("flood-", 3*limiterMax-1)]; !ok {
		t.Fatal("the newest address was forgotten")
	}
	if len(l.addrs) < limiterKeep {
		t.Fatalf("%d addresses left: the table was emptied", len(l.addrs))
	}
}

// One rule says which header values are credentials.
func TestSecretHeader(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"Authorization": true, "proxy-authorization": true, "Cookie": true, "Set-Cookie": true, "X-Api-Key": true,
		"X-Auth-Token": true, "CLIENT_SECRET": true, "X-Password": true, "Webhook-Signature": true, "X-Fluxora-Signature": true,
		"Content-Type": false, "traceparent": false, "X-Fluxora-Event": false, "Webhook-Id": false,
	} {
		if got := secretHeader(name); got != want {
			t.Errorf("secretHeader(%q) = %v, want %v", name, got, want)
		}
	}
}
