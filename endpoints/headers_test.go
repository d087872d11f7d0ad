package endpoints_test

import (
	"context"
	"testing"
)

// An endpoint's pending deliveries keep their headers in the dead letter,
// whether it is removed or disabled, so that `worker dlq replay` sends them
// again as they were.
func TestDeadLettersKeepHeaders(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"remove", "disable"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			s, b := setup(t)
			ctx := context.Background()
			e := add(t, s, "shop")
			exec(t, b.db, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, headers) VALUES ('e', '{}', $1, '{"x-tenant": "t1"}')`, e.ID)
			var err error
			if how == "remove" {
				_, err = s.Remove(ctx, "shop", true)
			} else {
				_, err = s.DisableByName(ctx, "shop", "maintenance")
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := b.db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE headers = '{"x-tenant": "t1"}'::jsonb`); n != 1 {
				t.Fatalf("%d dead letters kept the headers, want 1", n)
			}
		})
	}
}
