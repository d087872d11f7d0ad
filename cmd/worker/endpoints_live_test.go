package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// Endpoints added, changed or disabled with `worker endpoints` take effect
// on a running worker process without a restart: the claim reads the table.
func TestLiveEndpointChanges(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	first := newConsumer(t, nil)
	second := newConsumer(t, nil)
	first.secret, second.secret = "whsec_live_one", "whsec_live_one"
	startProcess(t, baseEnv(db, nil, nil))
	cli := func(args ...string) {
		t.Helper()
		if code, out, errs := ops(t, db, append([]string{"endpoints"}, args...)...); code != 0 {
			t.Fatalf("worker endpoints %v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	// Each step: enqueue one event, then wait until it reaches where it
	// should. A change that did not take effect fails the wait.
	step := func(event string, want *consumer, count int) {
		t.Helper()
		enqueue(t, db, event, `{}`, "")
		waitfor.True(t, 20*time.Second, "delivery after the change ("+event+")", func() bool { return len(want.deliveries()) == count })
	}
	cli("add", "--name", "live", "--url", first.srv.URL, "--secret", "whsec_live_one", "--events", "a,b")
	step("a", first, 1)
	cli("update", "live", "--url", second.srv.URL)
	step("b", second, 1)
	cli("update", "live", "--events", "c")
	step("c", second, 2)
	enqueue(t, db, "a", `{}`, "") // no longer subscribed: unrouted
	waitfor.True(t, 20*time.Second, "unsubscribed event recorded unrouted", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed AND fanout = 0 AND event_type = 'a'") == 1
	})
	cli("disable", "live", "--reason", "maintenance")
	enqueue(t, db, "c", `{}`, "live") // targeted at a disabled endpoint: dead-lettered, not sent
	waitfor.True(t, 20*time.Second, "delivery to a disabled endpoint dead-lettered", func() bool {
		return db.Count(t, "SELECT count(*) FROM webhook_dead_letter WHERE last_error LIKE '%disabled: maintenance%'") == 1
	})
	cli("enable", "live")
	cli("add", "--name", "late", "--url", first.srv.URL, "--secret", "whsec_live_one", "--events", "c")
	step("c", first, 2)
	waitfor.True(t, 20*time.Second, "enabled endpoint served again", func() bool { return len(second.deliveries()) == 3 })
	for _, c := range []*consumer{first, second} {
		for _, d := range c.deliveries() {
			if !d.SignatureOK || (d.Endpoint != "live" && d.Endpoint != "late") {
				t.Fatalf("bad delivery %+v", d)
			}
		}
	}
	if n := len(first.deliveries()) + len(second.deliveries()); n != 5 {
		t.Fatalf("%d requests, want 5", n)
	}
	_, out, _ := ops(t, db, "endpoints", "list")
	if strings.Contains(out, "whsec_live_one") {
		t.Fatalf("endpoints list prints a secret:\n%s", out)
	}
}
