package main

import (
	"strings"
	"testing"
)

// dlq replay --endpoint NAME --since --until [--event-type] replays only
// the dead letters of that endpoint that died in [since, until) (shop's
// died 2 hours and 1 hour ago).
func TestDLQReplayTimeRange(t *testing.T) {
	t.Parallel()
	f := newDLQFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"none of another event type", []string{"--since", "3h", "--until", "0s", "--event-type", "other"}, "replayed 0"},
		{"until excludes the older one's end", []string{"--since", "150m", "--until", "90m"}, "replayed 1"},
		{"the rest of the range", []string{"--since", "90m", "--until", "30m", "--event-type", "order.created"}, "replayed 1"},
	} {
		code, out, errs := ops(t, f.db, append([]string{"dlq", "replay", "--endpoint", "shop"}, tc.args...)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Fatalf("%s: code %d, out %q, stderr %q; want %q", tc.name, code, out, errs, tc.want)
		}
	}
	if n := f.db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id = '"+f.shop+"'"); n != 2 {
		t.Fatalf("shop has %d rows back in the outbox, want 2", n)
	}
	if n := f.left(t); n != 3 {
		t.Fatalf("%d dead letters left, want 3 (the other endpoints')", n)
	}
	if code, _, errs := ops(t, f.db, "dlq", "replay", "--endpoint", "shop", "--until", "yesterday"); code != exitUsage {
		t.Fatalf("a bad --until: code %d (%s), want 2", code, errs)
	}
}
