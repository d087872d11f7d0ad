package claimer_test

import (
	"context"
	"testing"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/internal/testdb"
)

// BenchmarkClaimComplete claims a batch of 10 rows and records them all
// delivered: two round trips per batch whatever its size. Each op is one
// batch; allocs/op divided by 10 is the claimer's allocations per delivery.
//
//	go test ./claimer -run '^$' -bench ClaimComplete -benchmem
func BenchmarkClaimComplete(b *testing.B) {
	const batch = 10
	db := testdb.New(b)
	c, err := claimer.New(claimer.Config{Pool: db.Pool, BatchSize: batch})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	outcomes := make([]claimer.Outcome, batch)
	for i := range outcomes {
		outcomes[i] = claimer.Outcome{Kind: claimer.Done}
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload)
			SELECT 'bench', '{"seq":1,"t":1}' FROM generate_series(1, $1)`, batch); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		bt, err := c.Claim(ctx, batch)
		if err != nil || bt == nil || len(bt.Rows) != batch {
			b.Fatalf("claim: %v (%v)", err, bt)
		}
		if err := bt.Complete(ctx, outcomes); err != nil {
			b.Fatal(err)
		}
	}
}
